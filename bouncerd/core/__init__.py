"""Pure decision logic: no I/O, no clocks, no environment (tests/test_core_purity.py keeps it so)."""

"""``bouncerctl``: entry point of the console script and of ``python -m bouncerctl``."""

from __future__ import annotations

from bouncerctl.app import main

if __name__ == "__main__":
    main()

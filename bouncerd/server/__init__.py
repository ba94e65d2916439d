"""I/O adapters of the daemon: socket server, peer check, activation, journal, audit writer."""

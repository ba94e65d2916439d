"""bouncer-shim: launched by an mcpServers entry; relays stdio to the real server, asks bouncerd."""

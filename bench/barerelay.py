"""The least a relay process can cost: bytes from the client to the server and back, nothing else.

`bench/relay.py --floor` runs this beside the shim, in the same blocks: what it adds over a direct
connection is what any process in the path pays on this machine (two more pipe hops, each a wake-up
of a sleeping process), with no parsing, no daemon and no verdict. The shim's ratio is read against
it: the part above the floor is the shim's own.

    python bench/barerelay.py SERVER-COMMAND [ARGS...]
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys


def relay(argv: list[str]) -> int:
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert server.stdin is not None and server.stdout is not None
    routes = {0: server.stdin.fileno(), server.stdout.fileno(): 1}
    sel = selectors.DefaultSelector()
    for fd in routes:
        sel.register(fd, selectors.EVENT_READ)
    try:
        while True:
            for key, _ in sel.select():
                data = os.read(key.fd, 1 << 20)
                if not data:
                    return 0
                view = memoryview(data)
                while view:
                    view = view[os.write(routes[key.fd], view) :]
    finally:
        server.stdin.close()
        server.wait()


if __name__ == "__main__":
    sys.exit(relay(sys.argv[1:]))

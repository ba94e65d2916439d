"""A server that will not leave: ignores SIGTERM and the end of its stdin. Only SIGKILL stops it.

It writes its pid to $UPSTREAM_PIDFILE once its SIGTERM handler is in place, so a test knows when
it is ready and can check afterwards that it is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.environ["UPSTREAM_PIDFILE"], "w") as f:
    f.write(str(os.getpid()))
for _ in sys.stdin.buffer:
    pass
while True:
    time.sleep(1)

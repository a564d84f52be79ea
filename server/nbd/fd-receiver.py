#!/usr/bin/env python3
"""Receives connected sockets passed with SCM_RIGHTS and hands them to the Node process that spawned us.

Usage: fd-receiver.py LISTEN_PATH   (spawned by fd-receiver.ts, with a Node IPC channel on NODE_CHANNEL_FD)

Node cannot receive SCM_RIGHTS from arbitrary peers, but its child_process IPC channel carries handles:
a JSON line {"cmd":"NODE_HANDLE","type":"net.Socket",...} sent together with an fd makes the parent see
a ready net.Socket. So each fd received on LISTEN_PATH is re-sent over that channel and Node serves it
directly: no bytes are relayed through this process.
"""

import errno
import json
import os
import selectors
import signal
import socket
import stat
import sys

HANDLE_MESSAGE = (json.dumps({"cmd": "NODE_HANDLE", "type": "net.Socket", "msg": {"fdReceiver": "socket"}}) + "\n").encode()
READY_MESSAGE = (json.dumps({"fdReceiver": "ready"}) + "\n").encode()
MAX_FDS_PER_MESSAGE = 16


def log(message):
    print(f"fd-receiver: {message}", file=sys.stderr, flush=True)


def is_connected_stream_socket(fd):
    """Node wraps a received fd by its kind and aborts on anything but a socket; only connected
    stream sockets (unix or TCP) can become a net.Socket, so everything else is refused here."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return False
        probe = socket.socket(fileno=os.dup(fd))  # family and type are read from the fd
        try:
            return (
                probe.family in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)
                and probe.type == socket.SOCK_STREAM
                and probe.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0
            )
        finally:
            probe.close()
    except OSError:
        return False


def bind_unix(path):
    """Binds path, replacing a stale socket file left by a dead process (never a live one)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(path)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            raise  # someone is listening there
        except ConnectionRefusedError:
            os.unlink(path)
            server.bind(path)
        finally:
            probe.close()
    server.listen(64)
    return server


def main():
    listen_path = sys.argv[1]
    channel = socket.socket(fileno=int(os.environ["NODE_CHANNEL_FD"]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = bind_unix(listen_path)
    try:
        channel.sendall(READY_MESSAGE)
        events = selectors.DefaultSelector()
        events.register(server, selectors.EVENT_READ, "accept")
        events.register(channel, selectors.EVENT_READ, "parent")
        while True:
            for key, _ in events.select():
                if key.data == "accept":
                    peer, _ = server.accept()
                    events.register(peer, selectors.EVENT_READ, "peer")
                elif key.data == "parent":
                    # Node only sends acknowledgements; end of file means the parent is gone.
                    if not channel.recv(65536):
                        return
                else:
                    peer = key.fileobj
                    try:
                        data, fds, _, _ = socket.recv_fds(peer, 4096, MAX_FDS_PER_MESSAGE)
                    except OSError as error:
                        log(f"receive failed: {error}")
                        data, fds = b"", []
                    for fd in fds:
                        if is_connected_stream_socket(fd):
                            # Callers (an OCaml toolstack) pass blocking sockets; libuv would then block
                            # Node's main thread in read(). The flag lives on the shared file description.
                            os.set_blocking(fd, False)
                            socket.send_fds(channel, [HANDLE_MESSAGE], [fd])
                        else:
                            log(f"refused fd {fd}: not a connected stream socket")
                        os.close(fd)
                    if not data and not fds:
                        events.unregister(peer)
                        peer.close()
    finally:
        server.close()
        try:
            os.unlink(listen_path)
        except FileNotFoundError:
            pass


if __name__ == "__main__":
    main()

"""This worker's address for the other machines of a run on several (GRPO_WORKER_ADDRESS,
issue 42): a free port on it for node 0's rendezvous store, and the network interface that
holds it, over which a node's ranks exchange tensors (gloo's and NCCL's socket interface;
left to them, gloo takes the address the machine's host name resolves to, which another
machine may not reach). Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct

_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def free_port(address: str) -> int:
    """A port free on `address` now."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((address.strip("[]"), 0))
        return int(sock.getsockname()[1])


def interface_of(address: str) -> str | None:
    """The name of this machine's network interface whose IPv4 address is `address` (a
    host name is resolved first); None when none is, or it cannot be told."""
    try:
        wanted = socket.gethostbyname(address)
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name[:15].encode())
            try:
                answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
            except OSError:
                continue
            if socket.inet_ntoa(answer[20:24]) == wanted:
                return name
    return None


def rank_environment(address: str | None) -> dict[str, str]:
    """What a node's ranks set in their environment to reach the other machines: gloo's and
    NCCL's socket interface, the one holding `address`, unless the worker's own environment
    names them (its ranks inherit those)."""
    name = interface_of(address) if address else None
    if name is None:
        return {}
    wanted = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
    return {key: name for key in wanted if key not in os.environ}

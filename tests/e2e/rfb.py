"""A VNC viewer's first steps over a websocket, as noVNC takes them through the portal: the RFB
handshake, VNC authentication with a password (DES of the server's challenge, the key's bits
reversed as VNC does it), the server's init, and one full frame in raw encoding, so that a test
can tell a drawn desktop from an empty screen."""

import ssl
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import websocket
from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

VNC_AUTH = 2
RAW = 0


def _reversed_bits(byte: int) -> int:
    return int(f"{byte:08b}"[::-1], 2)


def vnc_auth_response(password: str, challenge: bytes) -> bytes:
    """VNC authentication: the challenge under single DES (3DES with one key three times), the
    password's first 8 bytes as the key, each byte's bits reversed."""
    key = bytes(_reversed_bits(b) for b in password.encode()[:8].ljust(8, b"\0"))
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


@dataclass
class Seen:
    banner: str = ""
    security_types: list[int] = field(default_factory=list)
    authenticated: bool = False
    width: int = 0
    height: int = 0
    name: str = ""
    # distinct pixel values in the first full frame: 1 on an empty screen
    colours: int = 0


class _Stream:
    def __init__(self, connection: websocket.WebSocket) -> None:
        self.connection, self.buffer = connection, b""

    def read(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self.buffer += self.connection.recv()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def send(self, data: bytes) -> None:
        self.connection.send_binary(data)


def _connect(url: str, cookie: str | None) -> websocket.WebSocket:
    return websocket.create_connection(
        url,
        subprotocols=["binary"],
        cookie=cookie,
        sslopt={"cert_reqs": ssl.CERT_NONE},
        timeout=30,
    )


def _log_in(stream: _Stream, password: str, seen: Seen) -> int:
    """The handshake, the password and the server's init, into `seen`; the server's bits per
    pixel (0 where it did not let the viewer in)."""
    seen.banner = stream.read(12).decode().strip()
    stream.send(b"RFB 003.008\n")
    seen.security_types = list(stream.read(stream.read(1)[0]))
    if VNC_AUTH not in seen.security_types:
        return 0
    stream.send(bytes([VNC_AUTH]))
    stream.send(vnc_auth_response(password, stream.read(16)))
    seen.authenticated = struct.unpack(">I", stream.read(4))[0] == 0
    if not seen.authenticated:
        return 0
    stream.send(b"\x01")  # shared: other viewers stay connected
    seen.width, seen.height = struct.unpack(">HH", stream.read(4))
    bits_per_pixel = stream.read(16)[0]
    seen.name = stream.read(struct.unpack(">I", stream.read(4))[0]).decode()
    return bits_per_pixel


@contextmanager
def viewing(url: str, password: str, cookie: str | None = None) -> Iterator[Seen]:
    """A viewer logged in at `url` and left connected, asking for nothing, until the block
    ends: a user who keeps the desktop open in a browser tab."""
    connection = _connect(url, cookie)
    try:
        seen = Seen()
        _log_in(_Stream(connection), password, seen)
        yield seen
    finally:
        connection.close()


def view(url: str, password: str, cookie: str | None = None) -> Seen:
    """Connect to `url` (ws:// or wss://, certificates not checked: the portal's is
    self-signed) with `cookie` (the portal's session), log in with `password` and read a frame
    if the server lets it in."""
    connection = _connect(url, cookie)
    stream, seen = _Stream(connection), Seen()
    try:
        bits_per_pixel = _log_in(stream, password, seen)
        if not bits_per_pixel:
            return seen
        stream.send(struct.pack(">BxHi", 2, 1, RAW))
        stream.send(struct.pack(">BBHHHH", 3, 0, 0, 0, seen.width, seen.height))
        colours: set[bytes] = set()
        covered, size = 0, bits_per_pixel // 8
        while covered < seen.width * seen.height:
            message, rectangles = struct.unpack(">BxH", stream.read(4))
            assert message == 0, f"expected a framebuffer update, got message {message}"
            for _ in range(rectangles):
                _, _, width, height, encoding = struct.unpack(">HHHHi", stream.read(12))
                assert encoding == RAW, encoding
                pixels = stream.read(width * height * size)
                colours.update(pixels[i : i + size] for i in range(0, len(pixels), size))
                covered += width * height
        seen.colours = len(colours)
        return seen
    finally:
        connection.close()

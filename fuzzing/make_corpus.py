#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_nbd (fuzzing/corpus/): client byte
streams that reach every option and command, valid and not. Run it after
changing the protocol; the outputs are checked in."""
import os, struct, sys

OPTS = 0x49484156454F5054
def opt(o, data=b""):
    return struct.pack(">QII", OPTS, o, len(data)) + data
def go(name=b"", o=7, infos=(3,)):
    return opt(o, struct.pack(">I", len(name)) + name + struct.pack(">H", len(infos)) +
               b"".join(struct.pack(">H", i) for i in infos))
def meta(o, name, queries):
    d = struct.pack(">I", len(name)) + name + struct.pack(">I", len(queries))
    return opt(o, d + b"".join(struct.pack(">I", len(q)) + q for q in queries))
def req(t, off=0, ln=0, flags=0, cookie=1, payload=b""):
    return struct.pack(">IHHQQI", 0x25609513, flags, t, cookie, off, ln) + payload
FLAGS = struct.pack(">I", 3)  # FIXED_NEWSTYLE | NO_ZEROES

seeds = {
    "go_all_commands": FLAGS + opt(8) + meta(10, b"", [b"base:allocation"]) + go() +
        req(1, 4000, 5000, payload=bytes(range(256)) * 19 + bytes(136)) + req(0, 4000, 5000, cookie=2) +
        req(0, 0, 4096, flags=4, cookie=3) + req(7, 0, 1 << 20, cookie=4) + req(7, 0, 65536, flags=8) +
        req(3) + req(4, 8192, 8192, flags=1) + req(6, 100, 3000, flags=2) + req(6, 0, 10, flags=16) +
        req(5, 0, 65536) + req(2),
    "sparse_block_status": FLAGS + opt(8) + meta(9, b"sparse", []) + meta(10, b"sparse", [b"base:allocation", b"x:y"]) +
        go(b"sparse") + req(7, 0, 1 << 20) + req(1, 70000, 10, payload=b"0123456789") + req(7, 65536, 8192) + req(2),
    "export_name_old": FLAGS + opt(1, b"ro") + req(1, 0, 4, payload=b"abcd") + req(0, 0, 512) + req(2),
    "list_info_abort": struct.pack(">I", 1) + opt(3) + go(b"ro", 6, (0, 1, 2, 3)) + go(b"nope", 6) +
        opt(3, b"x") + opt(0x4242, b"junk") + meta(9, b"", [b"base:"]) + opt(2),
    "bad_requests": FLAGS + go() + req(0, (1 << 20) - 10, 20) + req(1, 1 << 20, 1, payload=b"x") +
        req(0, 0, (32 << 20) + 1) + req(99) + req(0, flags=0x80) + req(7, 0, 10) +
        struct.pack(">IHHQQI", 0xdeadbeef, 0, 0, 0, 0, 0),
    "bad_option_lengths": FLAGS + opt(7, struct.pack(">I", 1000) + b"ab") +
        meta(10, b"", []) + opt(10, struct.pack(">III", 0, 1, 100)) + opt(8, b"x") + go(),
    "bad_client_flags": struct.pack(">I", 0x80),
}
out = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "corpus")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)

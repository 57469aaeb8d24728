#!/usr/bin/env python3
"""gate_frame.py — an independent encoder of proposal-gate frames (docs/STRUCTURED.md,
src/gate/gate.h): the canonical bytes and HMAC-SHA256 tag written from the
documentation with Python's hmac, so tests can check that the C gate accepts
what the documented format says.

usage: gate_frame.py KEY_HEX DEVICE_ID REQUEST_ID SEQUENCE DEADLINE_MS ACTION PARAMS_JSON [SCHEMA_VERSION]
prints one frame (one line).
"""
import hashlib
import hmac
import struct
import sys


def canonical(ver, dev, req, seq, deadline, action, params):
    def s(b):
        b = b.encode()
        return struct.pack(">I", len(b)) + b
    return (b"edgellm-proposal/1\x00" + struct.pack(">Q", ver) + s(dev) + s(req) + struct.pack(">Q", seq)
            + struct.pack(">Q", deadline) + s(action) + s(params))


def frame(key_hex, dev, req, seq, deadline, action, params, ver=1):
    tag = hmac.new(bytes.fromhex(key_hex), canonical(ver, dev, req, seq, deadline, action, params),
                   hashlib.sha256).hexdigest()
    return ('{"schema_version":%d,"device_id":"%s","request_id":"%s","sequence":%d,"deadline_ms":%d,'
            '"action":"%s","params":%s,"tag":"%s"}' % (ver, dev, req, seq, deadline, action, params, tag))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) not in (7, 8):
        sys.exit(__doc__)
    print(frame(a[0], a[1], a[2], int(a[3]), int(a[4]), a[5], a[6], int(a[7]) if len(a) == 8 else 1))

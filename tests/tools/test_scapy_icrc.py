#!/usr/bin/python3
"""Cross-check INCA's ICRC and framing against scapy's RoCE layer.

Run with Debian's python3 (it has scapy): test_scapy_icrc.py PATH/TO/inca-frame
Seed: INCA_TEST_SEED (printed).
"""
import os
import random
import struct
import subprocess
import sys
import time

try:
    from scapy.all import Ether, IP, UDP, Dot1Q, Raw, raw
    from scapy.contrib.roce import BTH, cnp
except ImportError as e:
    print("SKIP: scapy is not importable (%s); install python3-scapy" % e)
    sys.exit(77)

CNP_VECTOR = bytes.fromhex(
    "e41d2dab2bc27cfe90643b320800"
    "45c2003c718c400040119161" "0a001101" "0a001201"
    "000012b700280000"
    "8100ffff4000011800000000" + "00" * 16 + "82fd002a")

DTYPE_SIZE = [4, 2, 2, 4, 8, 8]


def run_tool(tool, frames):
    out = subprocess.run([tool, "check"], input="".join(f.hex() + "\n" for f in frames),
                         capture_output=True, text=True, check=True, timeout=120)
    return [line.split() for line in out.stdout.splitlines()]


def inca_header(rng, dtype, count):
    op = rng.randrange(4) if dtype in (0, 1, 2, 5) else rng.randrange(7)
    return struct.pack("!BBBBBBHIHHHHIII", 1, 1, dtype, op, rng.randrange(8), 0,
                       count, rng.getrandbits(32), rng.getrandbits(16),
                       rng.randrange(1, 65536), rng.getrandbits(16), 0,
                       rng.getrandbits(32), rng.getrandbits(32), 0)


def scapy_ud(rng):
    dtype = rng.randrange(6)
    count = rng.randrange(1, 4096 // DTYPE_SIZE[dtype] + 1)
    elems = bytes(rng.getrandbits(8) for _ in range(count * DTYPE_SIZE[dtype]))
    pad = (4 - len(elems) % 4) % 4
    deth = struct.pack("!IB", rng.getrandbits(32), 0) + rng.getrandbits(24).to_bytes(3, "big")
    opcode = rng.choice([0x64, 0x65])
    imm = rng.getrandbits(32).to_bytes(4, "big") if opcode == 0x65 else b""
    body = deth + imm + inca_header(rng, dtype, count) + elems + b"\0" * pad
    l2 = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:fe")
    if rng.random() < 0.25:
        l2 = l2 / Dot1Q(prio=3, vlan=rng.randrange(1, 4095))
    pkt = (l2 /
           IP(src="10.%d.%d.%d" % tuple(rng.randrange(256) for _ in range(3)),
              dst="10.0.0.%d" % rng.randrange(1, 255),
              id=rng.getrandbits(16), flags="DF" if rng.random() < .5 else 0,
              tos=rng.getrandbits(8), ttl=rng.randrange(1, 256)) /
           UDP(sport=rng.randrange(1, 65536), dport=4791) /
           BTH(opcode=opcode, solicited=rng.getrandbits(1), padcount=pad,
               pkey=rng.getrandbits(16), fecn=rng.getrandbits(1),
               becn=rng.getrandbits(1), dqpn=rng.getrandbits(24),
               ackreq=rng.getrandbits(1), psn=rng.getrandbits(24)) /
           Raw(body))
    return raw(pkt)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tool = sys.argv[1]
    seed = int(os.environ.get("INCA_TEST_SEED", int(time.time())))
    print("# seed %d (rerun with INCA_TEST_SEED=%d)" % (seed, seed))
    rng = random.Random(seed)
    failures = []
    checks = 0

    def expect(cond, what):
        nonlocal checks
        checks += 1
        if not cond:
            failures.append(what)

    # 1. the ConnectX-4 Lx CNP
    (res,) = run_tool(tool, [CNP_VECTOR])
    expect(res == ["ok", "cnp", "2a00fd82"], "CNP vector: %s" % res)

    # 2. scapy-built UD SENDs: scapy computes the ICRC, we verify it
    frames = [scapy_ud(rng) for _ in range(150)]
    for i, (f, res) in enumerate(zip(frames, run_tool(tool, frames))):
        want = "%08x" % struct.unpack("<I", f[-4:])[0]
        expect(res == ["ok", "inca", want], "scapy UD #%d: %s, scapy ICRC %s" % (i, res, want))

    # 3. scapy CNPs
    cnps = []
    for _ in range(30):
        p = (Ether() / IP(src="10.0.0.%d" % rng.randrange(1, 255), dst="10.0.0.254",
                          tos=rng.getrandbits(8), id=rng.getrandbits(16)) /
             UDP(sport=rng.randrange(1, 65536), dport=4791) / cnp(rng.getrandbits(24)))
        cnps.append(raw(p))
    for i, res in enumerate(run_tool(tool, cnps)):
        expect(res[:2] == ["ok", "cnp"], "scapy CNP #%d: %s" % (i, res))

    # 4. one flipped payload bit is an ICRC error
    flipped = []
    for f in frames[:30]:
        b = bytearray(f)
        pos = len(b) - 5 - rng.randrange(8)
        b[pos] ^= 1 << rng.randrange(8)
        flipped.append(bytes(b))
    for i, res in enumerate(run_tool(tool, flipped)):
        expect(res[:2] == ["err", "icrc"], "flipped #%d: %s" % (i, res))

    # 5. frames our encoder builds: scapy recomputes the same ICRC
    out = subprocess.run([tool, "build", "100", str(seed)], capture_output=True,
                         text=True, check=True, timeout=60)
    built = [bytes.fromhex(line) for line in out.stdout.split()]
    expect(len(built) == 100, "built %d frames" % len(built))
    for i, f in enumerate(built):
        p = Ether(f)
        if UDP in p and p[UDP].dport == 4791 and BTH not in p:
            # scapy picks the layer above UDP by either port, and a random
            # source port it knows wins (5353 reads as mDNS): RoCEv2 is
            # the destination port's
            udp = p[UDP]
            above = raw(udp.payload)
            udp.remove_payload()
            udp.add_payload(BTH(above))
        if BTH not in p:
            expect(False, "built #%d: scapy sees no BTH" % i)
            continue
        p[BTH].icrc = None
        expect(raw(p) == f, "built #%d: scapy's ICRC %s, ours %s" %
               (i, raw(p)[-4:].hex(), f[-4:].hex()))
        ip = p[IP]
        expect(ip.id == 0 and ip.flags == 2 and p[UDP].dport == 4791,
               "built #%d: IP id %d flags %s" % (i, ip.id, ip.flags))

    for f in failures:
        print("FAIL:", f)
    print("%d passed, %d failed" % (checks - len(failures), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

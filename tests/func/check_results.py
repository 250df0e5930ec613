#!/usr/bin/python3
"""Check INCA result packets in a capture with scapy's RoCE layer.

Usage: check_results.py CAPTURE SWITCH_IP MEMBER_QPN QKEY GROUP
Every UDP/4791 packet from SWITCH_IP must be a UD SEND_ONLY whose ICRC
scapy recomputes to the same bytes, addressed to MEMBER_QPN with QKEY,
carrying an INCA result header of GROUP, or a WAIT (type 4: the header
alone, with the no-data flag; docs/protocol.md 3.2). Prints 'N passed, N
failed' (and how many of the passed were WAITs).
"""
import struct
import sys

try:
    from scapy.all import rdpcap, raw, Ether, IP, UDP
    from scapy.contrib.roce import BTH
except ImportError as e:
    print("SKIP: scapy is not importable (%s)" % e)
    sys.exit(77)


def main():
    cap, switch_ip, qpn, qkey, group = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), \
        int(sys.argv[4], 0), int(sys.argv[5], 0)
    passed = failed = waits = 0
    for i, pkt in enumerate(rdpcap(cap)):
        p = Ether(raw(pkt))
        if IP not in p or p[IP].src != switch_ip or UDP not in p or BTH not in p:
            continue
        errors = []
        orig = raw(p)
        p[BTH].icrc = None
        if raw(p) != orig:
            errors.append("ICRC %s, scapy computes %s" % (orig[-4:].hex(), raw(p)[-4:].hex()))
        b = p[BTH]
        if b.opcode != 0x64:
            errors.append("opcode %#x" % b.opcode)
        if b.dqpn != qpn:
            errors.append("dest QP %d" % b.dqpn)
        body = raw(b.payload)  # DETH .. padding (scapy keeps the ICRC apart)
        deth_qkey, = struct.unpack("!I", body[:4])
        if deth_qkey != qkey:
            errors.append("Q_Key %#x" % deth_qkey)
        ver, typ, dtype, op, flags, _, count, gid = struct.unpack("!BBBBBBHI", body[8:20])
        if (ver, gid) != (1, group) or typ not in (2, 4):
            errors.append("INCA header version %d type %d group %d" % (ver, typ, gid))
        sizes = [4, 2, 2, 4, 8, 8]
        if typ == 4:
            waits += 1
            if not flags & 0x08 or b.padcount != 0 or len(body) - 8 - 32 != 0:
                errors.append("WAIT: flags %#x, pad %d, %d bytes" % (flags, b.padcount, len(body)))
        elif dtype < 6:
            need = count * sizes[dtype]
            pad = (4 - need % 4) % 4
            if b.padcount != pad or len(body) - 8 - 32 != need + pad:
                errors.append("length: %d elements, pad %d, %d bytes" % (count, b.padcount, len(body)))
        if errors:
            failed += 1
            print("FAIL packet %d: %s" % (i, "; ".join(errors)))
        else:
            passed += 1
    if passed == waits:
        print("FAIL: no result packets from %s in %s" % (switch_ip, cap))
        failed += 1
    print("%d passed (%d of them WAITs), %d failed" % (passed, waits, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

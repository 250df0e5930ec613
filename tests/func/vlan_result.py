#!/usr/bin/python3
"""Send one VLAN-tagged contribution to a one-member group and check that the
result comes back with the same VLAN id and priority, a valid ICRC and the
contribution's elements. Run inside the member's namespace.
Usage: vlan_result.py IFACE SRC_IP SWITCH_IP GROUP_QPN QKEY SRC_QPN GROUP_ID"""
import struct
import sys
import threading
import time

try:
    from scapy.all import Ether, Dot1Q, IP, UDP, Raw, raw, sendp, sniff, get_if_hwaddr
    from scapy.contrib.roce import BTH
except ImportError as e:
    print("SKIP: scapy is not importable (%s)" % e)
    sys.exit(77)

iface, src, sw = sys.argv[1:4]
gqpn, qkey, sqpn, gid = (int(x, 0) for x in sys.argv[4:8])
elems = [1.5, -2.0, 3.25, 1e6]
payload = struct.pack("<4f", *elems)
deth = struct.pack("!IB", qkey, 0) + sqpn.to_bytes(3, "big")
hdr = struct.pack("!BBBBBBHIHHHHIII", 1, 1, 0, 0, 0, 0, len(elems), gid, 0, 1, 0, 0, 7, 0, 0)
frame = (Ether(src=get_if_hwaddr(iface), dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=100, prio=3) /
         IP(src=src, dst=sw, id=0, flags="DF", tos=26 << 2) / UDP(sport=4791, dport=4791, chksum=0) /
         BTH(opcode=0x64, dqpn=gqpn, psn=0) / Raw(deth + hdr + payload))

got = []
def catch():
    got.extend(sniff(iface=iface, timeout=6, count=1,
                     lfilter=lambda p: IP in p and p[IP].src == sw and UDP in p and p[UDP].dport == 4791))
t = threading.Thread(target=catch)
t.start()
time.sleep(1)
sendp(frame, iface=iface, verbose=False)
t.join()
if not got:
    print("FAIL: no result came back")
    sys.exit(1)
p = Ether(raw(got[0]))
errors = []
if Dot1Q not in p:
    errors.append("result is untagged")
elif (p[Dot1Q].vlan, p[Dot1Q].prio) != (100, 3):
    errors.append("VLAN %d priority %d" % (p[Dot1Q].vlan, p[Dot1Q].prio))
orig = raw(p)
p[BTH].icrc = None
if raw(p) != orig:
    errors.append("ICRC")
body = raw(p[BTH].payload)
if body[40:40 + 16] != payload:
    errors.append("elements %s" % body[40:56].hex())
print("result: vlan %s prio %s, %d bytes%s" % (p[Dot1Q].vlan if Dot1Q in p else "-",
      p[Dot1Q].prio if Dot1Q in p else "-", len(orig), (": " + "; ".join(errors)) if errors else ""))
sys.exit(1 if errors else 0)

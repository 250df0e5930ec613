#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""inca-manager's crash test, the two sides that are not shell.

  crash_client.py ops URL TOKEN HOSTS SEED MAX LOG
      creates and deletes jobs (1..4 ranks on random hosts of HOSTS, a
      space-separated list of addresses; at most 12 live, counting those
      already there) until MAX operations are done or
      the manager stops answering; appends to LOG, flushed per line,
      "created ID" once every rank of ID was answered 200, "deleting ID"
      before a DELETE and "deleted ID" once it was answered 200. Exit 0.

  crash_client.py check URL ADMIN_TOKEN DB LOG
      after a restart: the manager's allocations (GET /v1/switches: slots,
      groups) are the sum over its live jobs (GET /v1/jobs: switches,
      window) and what its database's rows say; every switch holds exactly
      the groups the manager gives it (its agent's group_ids against
      GET /v1/groups); every job LOG says was created and not since deleted
      or being deleted is live, none it says was deleted is. Prints what
      differs; exit 1 when anything does.
"""
import json
import random
import sqlite3
import sys
import urllib.error
import urllib.request


def call(url, token, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def ops(url, token, hosts, seed, max_ops, log_path):
    rnd = random.Random(int(seed))
    hosts = hosts.split()
    try:
        st, jobs = call(url, token, "GET", "/v1/jobs")
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0
    live = [j["id"] for j in jobs] if st == 200 else []    # earlier rounds' too
    with open(log_path, "a") as log:
        def note(line):
            log.write(line + "\n")
            log.flush()
        for n in range(int(max_ops)):
            try:
                if live and (len(live) >= 12 or rnd.random() < 0.4):
                    jid = live.pop(rnd.randrange(len(live)))
                    note("deleting " + jid)
                    st, _ = call(url, token, "DELETE", "/v1/jobs/" + jid)
                    if st == 200:
                        note("deleted " + jid)
                    continue
                jid = "c%d-%d" % (int(seed), n)
                size = rnd.randint(1, 4)
                picked = rnd.sample(hosts, size)
                ok = True
                for r, ip in enumerate(picked):
                    st, body = call(url, token, "POST", "/v1/jobs/%s/ranks" % jid,
                                    {"rank": r, "size": size, "ip": ip})
                    if st != 200:
                        print("crash_client: %s rank %d: %d %s" % (jid, r, st, body),
                              file=sys.stderr)
                        ok = False
                        break
                if ok:
                    note("created " + jid)
                    live.append(jid)
            except (urllib.error.URLError, ConnectionError, OSError):
                return 0        # the manager was killed
    return 0


def check(url, admin, db, log_path):
    bad = []
    st, sws = call(url, admin, "GET", "/v1/switches")
    st2, jobs = call(url, admin, "GET", "/v1/jobs")
    st3, groups = call(url, admin, "GET", "/v1/groups")
    if (st, st2, st3) != (200, 200, 200):
        print("check: the manager answered %s" % ((st, st2, st3),))
        return 1
    # allocations: the manager's usage against its live jobs' trees
    want = {s["name"]: [0, 0] for s in sws}
    for j in jobs:
        for name in j.get("switches", []):
            want[name][0] += j["window"]
            want[name][1] += 1
    for s in sws:
        got = [s["slots"], s["groups"]]
        if got != want[s["name"]]:
            bad.append("%s: slots, groups %s; the live jobs hold %s" % (s["name"], got,
                                                                     want[s["name"]]))
    # the rows in the database say the same
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    rows = {name: [slots, n] for name, slots, n in con.execute(
        "SELECT switch, SUM(slots), COUNT(*) FROM groups GROUP BY switch")}
    db_jobs = {r[0] for r in con.execute("SELECT id FROM jobs")}
    orphans = con.execute("SELECT COUNT(*) FROM groups WHERE job NOT IN "
                          "(SELECT id FROM jobs)").fetchone()[0]
    con.close()
    for name, (slots, n) in want.items():
        if rows.get(name, [0, 0]) != [slots, n]:
            bad.append("%s: the database's rows hold %s, the manager %s" %
                       (name, rows.get(name, [0, 0]), [slots, n]))
    if orphans:
        bad.append("%d group rows of no job" % orphans)
    api_jobs = {j["id"] for j in jobs}
    if db_jobs != api_jobs:
        bad.append("jobs: database %s, manager %s" % (sorted(db_jobs - api_jobs),
                                                      sorted(api_jobs - db_jobs)))
    # the switches hold exactly the manager's groups
    for s in sws:
        held = sorted((s.get("counters") or {}).get("group_ids", []))
        given = sorted(g["id"] for g in groups.get(s["name"], []))
        if held != given:
            bad.append("%s holds groups %s, the manager gives it %s" % (s["name"], held,
                                                                       given))
    # what was acknowledged survived
    created, gone = set(), set()
    for line in open(log_path):
        what, jid = line.split()
        if what == "created":
            created.add(jid)
        else:
            gone.add(jid)       # deleting (maybe done) or deleted
    deleted = {l.split()[1] for l in open(log_path) if l.startswith("deleted ")}
    lost = sorted(created - gone - api_jobs)
    if lost:
        bad.append("acknowledged jobs missing after the restart: %s" % lost)
    ghosts = sorted(deleted & api_jobs)
    if ghosts:
        bad.append("deleted jobs back after the restart: %s" % ghosts)
    for b in bad:
        print("check: " + b)
    print("check: %d live jobs, %d groups on %d switches%s" % (
        len(api_jobs), sum(len(v) for v in groups.values()), len(sws),
        ": consistent" if not bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "ops":
        sys.exit(ops(*sys.argv[2:]))
    if len(sys.argv) == 6 and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)

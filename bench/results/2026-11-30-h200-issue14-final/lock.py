# The engine lock's busy share in the prefetch and demote phases of a
# dedup_moves run with VC_LOCK_PROFILE (one rep): python3 lock.py run.log
# Holds are summed by phase (vc_volume_drop, the stats and the profile's
# own holds left out); a phase's time is its pages over its rate.
import re, sys
txt = open(sys.argv[1]).read()
parts = re.split(r'(  rep 1 \S+\s+xts \S+\s+D=\d: prefetch \d+ demote \d+ swap \d+ /s)', txt)
skip = ('vc_volume_drop', 'eng_debug_lock_profile', 'vc_get_stats')
def held(body, phase):
    sec = re.search(r'engine lock, ' + phase + r':.*?\n((?:  .*\n)+)', body)
    return sum(float(l.split('total')[1].split()[0]) for l in sec.group(1).splitlines()
               if l.split()[0] not in skip)
print('| data | cipher | dedup | prefetch k pages/s | c->mu held, ms | busy | us a page '
      '| demote k pages/s | c->mu held, ms | busy | us a page |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for i in range(1, len(parts), 2):
    data, enc, d, pf, dm = re.search(r'(\S+)\s+xts (\S+)\s+D=(\d): prefetch (\d+) demote (\d+)',
                                     parts[i]).groups()
    body = parts[i - 1]
    row = f"| {data} | {'XTS' if enc == 'on' else 'plain'} | {'on' if d == '1' else 'off'} "
    for phase, pages, rate in (('prefetch', 262144, int(pf)), ('demote', 245760, int(dm))):
        h = held(body, phase)
        dur = pages / rate * 1e3
        row += f"| {rate / 1e3:.0f} | {h:.0f} | {h / dur * 100:.0f} % | {h / pages * 1e3:.2f} "
    print(row + '|')

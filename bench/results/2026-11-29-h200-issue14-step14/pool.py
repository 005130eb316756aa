# Pooled on/off ratios of dedup_moves JSON files: python3 pool.py LABEL=a.json,b.json ...
# Each rep's own ratio (on and off of the same rep), medians over every file's reps; and the
# medians of the on and off rates, k pages/s (prefetch / demote / swap).
import json, sys, statistics as st
def load(files):
    out = {}
    for f in files:
        d = json.load(open(f))
        pts = d['points']
        for data in ('unique', 'factor4'):
            for enc in ('off', 'xts'):
                off = [p for p in pts if p['data'] == data and p['encrypt'] == enc and not p['dedup']][0]
                on = [p for p in pts if p['data'] == data and p['encrypt'] == enc and p['dedup']][0]
                key = (data, enc)
                for col in ('prefetch', 'demote', 'swap'):
                    rs = [a / b for a, b in zip(on[col + '_reps'], off[col + '_reps'])]
                    e = out.setdefault(key, {}).setdefault(col, {'r': [], 'on': [], 'off': []})
                    e['r'].extend(rs); e['on'].extend(on[col + '_reps']); e['off'].extend(off[col + '_reps'])
    return out
for a in sys.argv[1:]:
    label, files = a.split('=')[0], a.split('=')[1].split(',')
    o = load(files)
    print('==', label, len(o[('unique','off')]['demote']['r']), 'reps')
    for (data, enc), cols in o.items():
        print(f"{data:7s} {'XTS' if enc=='xts' else 'plain':5s} ratio " + ' / '.join(f"{st.median(cols[c]['r']):.3f}" for c in ('prefetch','demote','swap'))
              + "  | on k/s " + ' / '.join(f"{st.median(cols[c]['on'])/1e3:.0f}" for c in ('prefetch','demote','swap'))
              + "  | off k/s " + ' / '.join(f"{st.median(cols[c]['off'])/1e3:.0f}" for c in ('prefetch','demote','swap')))

#!/usr/bin/env python3
"""Which BF16-kind E2M1 word layouts decode in the fewest instructions.

A word holds the codes of four A registers (8 elements). Register i must end
up with each element's magnitude bits at BF16 bits 6..8 and its sign at 15
(+ 16 for the high element): the 8 places T below. Register i is made from
the word moved by a rotation r (bit p of the word lands at p - r mod 32; a
rotation whose bits do not wrap is a plain shift) and masked. Register 0 is
the word itself (r = 0). The script asks:
  1. can every register be one rotation and one mask (4 patterns tiling the
     32 bits)? It prints how many such tilings exist (none).
  2. which layouts give registers 1 and 2 one rotation each and register 3
     two (9 instructions a word: 4 moves + 5 masks/merges), preferring plain
     left shifts (IMAD.SHL on the FMA pipe) over funnel shifts (ALU pipe).
"""
import itertools

T = [6, 7, 8, 15, 22, 23, 24, 31]


def places(r, targets=T):
    return {(t + r) % 32 for t in targets}


def move(r, targets):
    """How the word is moved by rotation r for these targets."""
    if r == 0:
        return "word"
    if all(t - (32 - r) >= 0 for t in targets):
        return "shl %d" % (32 - r)
    if all(t + r < 32 for t in targets):
        return "shr %d" % r
    return "rotr %d" % r


def single_tilings():
    n = 0
    for rs in itertools.combinations(range(1, 32), 3):
        sets = [places(0)] + [places(r) for r in rs]
        if len(set().union(*sets)) == 32:
            n += 1
    return n


def nine_instruction_layouts():
    out = []
    for a, b in itertools.combinations(range(1, 32), 2):
        p0, pa, pb = places(0), places(a), places(b)
        if p0 & pa or p0 & pb or pa & pb:
            continue
        left = set(range(32)) - p0 - pa - pb
        for r, r2 in itertools.combinations(range(32), 2):
            def match(i, used, got):
                if i == len(T):
                    return got
                for rr in (r, r2):
                    s = (T[i] + rr) % 32
                    if s in left and s not in used:
                        m = match(i + 1, used | {s}, got + [(T[i], rr)])
                        if m:
                            return m
                return None
            m = match(0, set(), [])
            if not m:
                continue
            parts = {rr: [t for t, x in m if x == rr] for rr in (r, r2)}
            moves = [move(a, T), move(b, T)] + [move(rr, parts[rr]) for rr in (r, r2)]
            masks = [hex(sum(1 << t for t in parts[rr])) for rr in (r, r2)]
            rot = sum(x.startswith("rotr") for x in moves)
            shl = sum(x.startswith("shl") for x in moves)
            out.append((rot, -shl, moves, masks))
    return sorted(out)


if __name__ == "__main__":
    print("tilings by one rotation a register:", single_tilings())
    layouts = nine_instruction_layouts()
    print("9-instruction layouts:", len(layouts))
    for rot, _, moves, masks in layouts[:4]:
        print("  registers 1, 2: %s, %s; register 3: %s (mask %s) | %s (mask %s)"
              % (moves[0], moves[1], moves[2], masks[0], moves[3], masks[1]))

#!/usr/bin/env python3
"""The PyTorch BF16 peer of `megajit bench mega-moe`: the same MoE layer, written
the plain way a PyTorch user would, timed on the same routing.

Reads the directories `megajit bench mega-moe --dump-routing DIR` wrote (their
index.json and each input set's top-k ids and weights) and, per configuration:
sorts the (token, slot) pairs by expert, gathers the token rows, runs GEMM 1 as
one grouped matmul over the experts, SiLU(gate) * up, GEMM 2 as another grouped
matmul, scales each pair by its routing weight and scatter-adds it into its
token's row. Weights are random BF16 of the layer's shape (the layout and the
bytes streamed are what is timed, not megajit's values); BF16 weights of all
experts are far larger than L2, so they need no rotating, but the tokens do:
each input set of the dump gets its own tokens and its own CUDA graph, and the
replays cycle over them. The time is the median of --replays replays, each
between two CUDA events.

Grouped matmul: torch.nn.functional.grouped_mm where PyTorch has it, else
torch._grouped_mm; without either, a loop of per-expert matmuls over the group
sizes the routing gives (known on the host, so the loop can still be captured),
said in every line and in the JSON. The grouped path is checked once per shape
against that loop before anything is timed.

    python3 bench/torch_moe_peer.py DIR [DIR ...] [--replays N] [--json FILE]
"""

import argparse
import json
import os
import statistics
import sys


def fail(message):
    print(f"torch_moe_peer: {message}", file=sys.stderr)
    sys.exit(1)


def read_configs(dirs):
    """Every configuration of every index, with the directory its files are in."""
    configs = []
    for d in dirs:
        path = os.path.join(d, "index.json")
        try:
            with open(path) as f:
                index = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"cannot read {path}: {e}")
        if index.get("version") != 1:
            fail(f"{path}: unknown version {index.get('version')!r} (this script reads 1)")
        for c in index["configs"]:
            c["dir"] = d
            configs.append(c)
    if not configs:
        fail("the indexes list no configuration")
    return configs


def pick_grouped_mm(torch):
    """(name, fn(a, b, offs)) of the grouped matmul this PyTorch has, or (None, None)."""
    fn = getattr(torch.nn.functional, "grouped_mm", None)
    if fn is not None:
        return "torch.nn.functional.grouped_mm", lambda a, b, offs: fn(a, b, offs=offs)
    fn = getattr(torch, "_grouped_mm", None)
    if fn is not None:
        return "torch._grouped_mm", lambda a, b, offs: fn(a, b, offs=offs)
    return None, None


class Layer:
    """One MoE layer's BF16 weights: w13 [E][2I][H] (gate rows, then up rows) and
    w2 [E][H][I], stored as checkpoints store them (out, in)."""

    def __init__(self, torch, c):
        self.torch = torch
        self.H, self.I, self.E, self.K = c["hidden"], c["intermediate"], c["experts"], c["topk"]
        gen = torch.Generator(device="cuda").manual_seed(1234)
        # In place: a kimi-k2 w13 alone is 22.5 GB.
        self.w13 = torch.randn(self.E, 2 * self.I, self.H, device="cuda", dtype=torch.bfloat16,
                               generator=gen).mul_(0.02)
        self.w2 = torch.randn(self.E, self.H, self.I, device="cuda", dtype=torch.bfloat16,
                              generator=gen).mul_(0.02)
        # grouped_mm multiplies by mat_b[g] as (K, N): the transposed view of (N, K) storage.
        self.w13_t = self.w13.transpose(-2, -1)
        self.w2_t = self.w2.transpose(-2, -1)

    def sorted_pairs(self, ids):
        torch = self.torch
        flat = ids.reshape(-1).to(torch.int64)
        order = torch.sort(flat, stable=True).indices
        return order, order // self.K

    def grouped(self, gmm, x, ids, weights):
        """The layer with grouped matmuls; every op is capturable (no host sync)."""
        torch = self.torch
        order, token_of = self.sorted_pairs(ids)
        flat = ids.reshape(-1).to(torch.int64)
        counts = torch.zeros(self.E, device="cuda", dtype=torch.int32)
        counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        xs = x.index_select(0, token_of)
        h = gmm(xs, self.w13_t, offs)
        a = torch.nn.functional.silu(h[:, : self.I]) * h[:, self.I :]
        o = gmm(a, self.w2_t, offs)
        o = o * weights.reshape(-1).index_select(0, order).to(torch.bfloat16).unsqueeze(1)
        return torch.zeros_like(x).index_add_(0, token_of, o)

    def looped(self, ranges, x, ids, weights):
        """The same with one matmul pair per expert hit; ranges = [(expert, start,
        end)] of the sorted pairs, from the routing on the host."""
        torch = self.torch
        order, token_of = self.sorted_pairs(ids)
        xs = x.index_select(0, token_of)
        o = torch.empty(xs.shape[0], self.H, device="cuda", dtype=torch.bfloat16)
        for e, s0, s1 in ranges:
            h = xs[s0:s1] @ self.w13[e].t()
            a = torch.nn.functional.silu(h[:, : self.I]) * h[:, self.I :]
            o[s0:s1] = a @ self.w2[e].t()
        o = o * weights.reshape(-1).index_select(0, order).to(torch.bfloat16).unsqueeze(1)
        return torch.zeros_like(x).index_add_(0, token_of, o)


def load_set(torch, c, s):
    """One input set's ids [T][K] (int32) and weights [T][K] (fp32) on the device, and
    the expert ranges of its sorted pairs."""
    T, K = c["tokens"], c["topk"]

    def read(name, dtype):
        path = os.path.join(c["dir"], name)
        with open(path, "rb") as f:
            data = bytearray(f.read())
        t = torch.frombuffer(data, dtype=dtype)
        if t.numel() != T * K:
            fail(f"{path}: {t.numel()} values, the index says {T} x {K}")
        return t.view(T, K)

    ids = read(s["ids"], torch.int32)
    w = read(s["weights"], torch.float32)
    if int(ids.min()) < 0 or int(ids.max()) >= c["experts"]:
        fail(f"{s['ids']}: an id outside 0..{c['experts'] - 1}")
    counts = torch.bincount(ids.reshape(-1).to(torch.int64), minlength=c["experts"]).tolist()
    ranges, start = [], 0
    for e, n in enumerate(counts):
        if n:
            ranges.append((e, start, start + n))
        start += n
    return ids.cuda(), w.cuda(), ranges


def calc_diff(torch, x, y):
    x, y = x.double(), y.double()
    denom = (x * x + y * y).sum()
    return 0.0 if denom == 0 else float(1 - 2 * (x * y).sum() / denom)


def capture(torch, fn):
    """fn captured in a CUDA graph after two warm-up runs on a side stream (the
    graph-capture recipe of torch.cuda.graphs); returns (graph, its output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def time_config(torch, layer, gmm, c, replays, eager):
    sets = []
    gen = torch.Generator(device="cuda").manual_seed(c["tokens"])
    for s in c["sets"]:
        ids, w, ranges = load_set(torch, c, s)
        x = torch.randn(c["tokens"], layer.H, device="cuda", dtype=torch.bfloat16, generator=gen)
        if gmm:
            fn = lambda x=x, ids=ids, w=w: layer.grouped(gmm, x, ids, w)  # noqa: E731
        else:
            fn = lambda x=x, ids=ids, w=w, r=ranges: layer.looped(r, x, ids, w)  # noqa: E731
        # A graph holds its inputs' addresses, not the tensors: fn (whose
        # defaults are x, ids, w) must outlive every replay.
        if eager:
            sets.append((fn, fn(), fn))
        else:
            graph, out = capture(torch, fn)
            sets.append((graph.replay, out, fn))
    for step, _, _ in sets:
        step()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(replays)]
    for i, (start, end) in enumerate(events):
        start.record()
        sets[i % len(sets)][0]()
        end.record()
    torch.cuda.synchronize()
    for _, out, _ in sets:
        if not bool(out.isfinite().all()):
            fail(f"{c['shape']} T={c['tokens']}: the layer's output is not finite")
    return statistics.median(s.elapsed_time(e) for s, e in events) * 1e3, len(sets)


def check_grouped(torch, layer, gmm, c):
    """The grouped path against the per-expert loop on set 0 of c: a wrong use of
    grouped_mm (operand layout, offsets) cannot pass unnoticed."""
    ids, w, ranges = load_set(torch, c, c["sets"][0])
    x = torch.randn(c["tokens"], layer.H, device="cuda", dtype=torch.bfloat16)
    d = calc_diff(torch, layer.grouped(gmm, x, ids, w), layer.looped(ranges, x, ids, w))
    if not d < 1e-3:
        fail(f"{c['shape']}: grouped_mm and the per-expert loop disagree (calc_diff {d:.3g}): "
             "the peer's use of grouped_mm is wrong")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", help="directories written by --dump-routing")
    ap.add_argument("--replays", type=int, default=50, help="timed graph replays (default 50)")
    ap.add_argument("--json", metavar="FILE", help="also write the results there")
    ap.add_argument("--impl", choices=("auto", "loop"), default="auto",
                    help="auto: grouped_mm where PyTorch has it; loop: per-expert matmuls")
    ap.add_argument("--eager", action="store_true",
                    help="time eager calls instead of CUDA graph replays")
    ap.add_argument("--tokens", help="only these tokens-per-rank counts (comma-separated)")
    ap.add_argument("--shape", help="only this shape (a name in the index)")
    args = ap.parse_args()
    if args.replays < 1:
        fail("--replays must be at least 1")
    configs = read_configs(args.dirs)
    if args.shape:
        configs = [c for c in configs if c["shape"] == args.shape]
        if not configs:
            fail(f"no configuration of shape {args.shape}")
    if args.tokens:
        wanted = {int(t) for t in args.tokens.split(",")}
        configs = [c for c in configs if c["tokens_per_rank"] in wanted]
        if not configs:
            fail(f"no configuration has tokens_per_rank in {sorted(wanted)}")
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed (pip install torch); no peer numbers")
    if not torch.cuda.is_available():
        fail("PyTorch sees no CUDA device")
    name, gmm = pick_grouped_mm(torch) if args.impl == "auto" else (None, None)
    impl = name or ("per-expert matmul loop" if args.impl == "loop" else
                    "per-expert matmul loop (this PyTorch has no grouped_mm)")
    device = torch.cuda.get_device_name()
    mode = "eager calls" if args.eager else "CUDA graphs"
    impl += " (eager)" if args.eager else ""
    print(f"torch {torch.__version__} on {device}: {impl}, {mode}, median of "
          f"{args.replays} replays", file=sys.stderr)

    results, layer, layer_key = [], None, None
    for c in sorted(configs, key=lambda c: (c["hidden"], c["intermediate"], c["experts"],
                                            c["topk"], c["routing"], c["tokens"])):
        key = (c["hidden"], c["intermediate"], c["experts"], c["topk"])
        if key != layer_key:
            layer = None
            torch.cuda.empty_cache()
            layer, layer_key = Layer(torch, c), key
            if gmm:
                check_grouped(torch, layer, gmm, c)
        us, nsets = time_config(torch, layer, gmm, c, args.replays, args.eager)
        line = {k: c[k] for k in ("shape", "hidden", "intermediate", "experts", "topk", "routing",
                                  "ranks", "tokens_per_rank", "tokens")}
        line.update(us=us, sets=nsets, replays=args.replays, impl=impl)
        results.append(line)
        print(f"{c['shape']} {c['routing']} R={c['ranks']} T={c['tokens_per_rank']}: "
              f"{us:.1f} us ({impl})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": device, "impl": impl,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()

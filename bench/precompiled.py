"""The MegaMoE main kernels a manifest or preset builds, for the SASS and ptxas
scripts of bench/: `megajit precompile` into a cache, then that cache's entries.
"""
import json, subprocess


def megajit(cli, cache, env, *args):
    """stdout of `megajit ARGS --cache CACHE`; raises when it fails."""
    return subprocess.run([cli, *args, "--cache", cache], env=env, check=True,
                          capture_output=True, text=True).stdout


def precompile(cli, cache, env, sources):
    """Compiles each (flag, value) source, --preset or --manifest, for sm_90a."""
    for flag, value in sources:
        megajit(cli, cache, env, "precompile", flag, value, "--arch", "sm_90a", "--json")


def main_kernels(cli, cache, env):
    """The cache's MegaMoE main kernels (`cache ls --json` entries)."""
    return [e for e in json.loads(megajit(cli, cache, env, "cache", "ls", "--json"))
            if e["kernel_name"].startswith("mj::mega_moe_kernel<")]

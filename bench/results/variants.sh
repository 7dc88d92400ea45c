# Sourced by the sessions' prepare scripts (bench/results/*/prepare.sh), from
# the repo root: variant CLIs and template trees for A/B device calls.

cli_at() { # cli_at NAME REV [EDIT]: build/vcli/NAME = REV's CLI, after `EDIT DIR` edits its worktree
  local name=$1 rev=$2 edit=${3:-} dir=/tmp/wt-$1
  rm -rf "$dir" "build/vcli/$name"
  git worktree add -f "$dir" "$rev" -q
  [ -z "$edit" ] || "$edit" "$dir"
  make -C "$dir" -j2 all > /dev/null
  mkdir -p "build/vcli/$name"
  cp -r "$dir/build/bin" "$dir/build/lib" "build/vcli/$name/"
  git worktree remove --force "$dir"
}

templates_with() { # templates_with NAME PATCH: build/tv/NAME = templates + PATCH's templates/ part
  rm -rf "build/tv/$1"
  mkdir -p build/tv
  cp -r templates "build/tv/$1"
  python3 -c 'import re, sys; print("".join(p for p in re.split(r"(?=^diff --git )", sys.stdin.read(), flags=re.M) if p.startswith("diff --git a/templates/")), end="")' \
    < "$2" | patch -s -p2 -d "build/tv/$1"
  find "build/tv/$1" -name '*.orig' -delete
}

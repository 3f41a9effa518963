#!/usr/bin/env bash
# Checks the module layout of the crates that issue 12 laid out in layers:
#
#  1. no import circle between the modules of a crate's `src/`: for every
#     module folder (the crate root included), the edges between its direct
#     children (files and sub-folders, each folder taken whole) must form no
#     cycle. A folder's own file (`mod.rs`, `lib.rs`, `main.rs`: the facade
#     and the shared types its children extend) and its children may use
#     each other; those uses are listed with -v, not checked;
#  2. no file over the line limit under the size-checked folder (`.rs`, `.cu`).
#
# Usage: scripts/check-layout.sh [-v] [--max-lines N] [--sizes DIR] [SRC ...]
#   defaults: SRC = crates/tomors-cuda/src crates/tomors-cli/src,
#             --sizes crates/tomors-cuda (its target/ skipped), --max-lines 800.
#   -v prints every edge (with one place that makes it) and each folder's
#   modules in an order in which every module comes after those it uses.
# Exit status: 0 when clean, 1 on a cycle or an oversize file, 2 on bad usage.
#
# How an edge is found (a small Rust lexer in awk; comments, strings and
# char literals are skipped): every `use` tree and every `crate::`,
# `super::`, `self::` path, and in a module with sub-modules every path
# that starts with a sub-module's name, is resolved to the deepest module
# it names, following `pub use` re-exports (`pub use x::Y` in a `mod.rs` is
# the folder's facade, not an edge). Paths into other crates are ignored.
# Inline modules (`mod tests { … }`) count as their file. Macros invoked by
# bare name and items reached only through a glob `pub use x::*` are not
# seen, so an edge can be missed but never invented.
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
verbose=0
max_lines=800
sizes=()
srcs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -v | --verbose) verbose=1 ;;
    --max-lines)
      max_lines=${2:?--max-lines needs a number}
      shift
      ;;
    --sizes)
      sizes+=("${2:?--sizes needs a folder}")
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "check-layout: unknown option $1 (see --help)" >&2
      exit 2
      ;;
    *) srcs+=("$1") ;;
  esac
  shift
done
if [ ${#srcs[@]} -eq 0 ]; then
  srcs=("$root/crates/tomors-cuda/src" "$root/crates/tomors-cli/src")
  [ ${#sizes[@]} -gt 0 ] || sizes=("$root/crates/tomors-cuda")
fi
case "$max_lines" in
  '' | *[!0-9]*)
    echo "check-layout: --max-lines $max_lines is not a number" >&2
    exit 2
    ;;
esac

read -r -d '' lexer_and_graph <<'AWK' || true
# ---- reading: one string per file, module path from the file's path ----
FNR == 1 {
  nf++; fname[nf] = FILENAME
  rel = substr(FILENAME, length(src) + 2)
  m = rel; sub(/\.rs$/, "", m)
  if (m == "lib" || m == "main") m = ""
  sub(/(^|\/)mod$/, "", m)
  gsub(/\//, "::", m)
  fmod[nf] = m; frel[nf] = rel; ismod[m] = 1; modrel[m] = rel
}
{ text[nf] = text[nf] $0 "\n" }

function isid(c) { return c ~ /[A-Za-z0-9_]/ }

# Splits text[f] into tok[1..ntok]: identifiers, "::" and single
# punctuation characters; comments, strings and char literals dropped.
function lex(s,    n, i, c, d, j, depth, hashes, endq) {
  delete tok; ntok = 0; n = length(s); i = 1
  while (i <= n) {
    c = substr(s, i, 1)
    if (c == "/" && substr(s, i + 1, 1) == "/") {
      while (i <= n && substr(s, i, 1) != "\n") i++
      continue
    }
    if (c == "/" && substr(s, i + 1, 1) == "*") {
      depth = 1; i += 2
      while (i <= n && depth > 0) {
        d = substr(s, i, 2)
        if (d == "/*") { depth++; i += 2 }
        else if (d == "*/") { depth--; i += 2 }
        else i++
      }
      continue
    }
    if (c == "r" && (substr(s, i + 1, 1) == "#" || substr(s, i + 1, 1) == "\"") && (i == 1 || !isid(substr(s, i - 1, 1)))) {
      j = i + 1; hashes = ""
      while (substr(s, j, 1) == "#") { hashes = hashes "#"; j++ }
      if (substr(s, j, 1) == "\"") {
        endq = "\"" hashes; i = j + 1
        while (i <= n && substr(s, i, length(endq)) != endq) i++
        i += length(endq)
        continue
      }
    }
    if (c == "\"") {
      i++
      while (i <= n) {
        d = substr(s, i, 1)
        if (d == "\\") { i += 2; continue }
        i++
        if (d == "\"") break
      }
      continue
    }
    if (c == "'") {
      d = substr(s, i + 1, 1)
      if (d == "\\") {
        i += 2
        while (i <= n && substr(s, i, 1) != "'") i++
        i++
        continue
      }
      if (substr(s, i + 2, 1) == "'") { i += 3; continue }
      if (d > "~") {
        j = i + 1
        while (j <= n && j < i + 6 && substr(s, j, 1) != "'") j++
        if (substr(s, j, 1) == "'") { i = j + 1; continue }
      }
      i++   # a lifetime or a label: its name follows as an identifier
      continue
    }
    if (isid(c)) {
      j = i
      while (j <= n && isid(substr(s, j, 1))) j++
      tok[++ntok] = substr(s, i, j - i); i = j
      continue
    }
    if (c == ":" && substr(s, i + 1, 1) == ":") { tok[++ntok] = "::"; i += 2; continue }
    if (c !~ /[ \t\r\n]/) tok[++ntok] = c
    i++
  }
}

function isident(t) { return t ~ /^[A-Za-z_][A-Za-z0-9_]*$/ }

function parent(m) { if (m !~ /::/) return ""; sub(/::[^:]*$/, "", m); return m }

function join(a, b) { return a == "" ? b : (b == "" ? a : a "::" b) }

# The crate-absolute form of a path whose segments are "a::b::c", seen from
# module cur (inline modules included); "" + ok=0 for another crate's path.
function absolute(path, cur,    n, seg, i, base) {
  n = split(path, seg, /::/)
  i = 1
  if (seg[1] == "crate") { base = ""; i = 2 }
  else if (seg[1] == "self") { base = cur; i = 2 }
  else if (seg[1] == "super") {
    base = cur
    while (i <= n && seg[i] == "super") { base = parent(base); i++ }
  } else if (join(cur, seg[1]) in ismod) {
    base = cur   # a sub-module of the current module, by its name
  } else { absok = 0; return "" }
  absok = 1
  for (; i <= n; i++) if (seg[i] != "self") base = join(base, seg[i])
  return base
}

# Records one leaf of a use tree / one path.
function leaf(path, alias, pub,    a, name, n, seg) {
  a = absolute(path, curmod)
  if (!absok) return
  if (pub) {
    n = split(path, seg, /::/)
    name = alias != "" ? alias : seg[n]
    if (name == "self") name = seg[n - 1]
    if (name == "*") return
    reexp[curmod SUBSEP name] = a
    return
  }
  nref++; rsrc[nref] = fmod[curf]; rdst[nref] = a; rfile[nref] = frel[curf]
}

# Parses a use tree at tok[p] under prefix; leaves go to leaf().
function usetree(prefix, pub,    path, alias) {
  path = prefix
  while (p <= ntok) {
    if (tok[p] == "{") {
      p++
      while (p <= ntok && tok[p] != "}") {
        usetree(path, pub)
        if (tok[p] == ",") p++
      }
      p++
      return
    }
    if (tok[p] == "*") { leaf(join(path, "*"), "", pub); p++; return }
    if (tok[p] == "::") { p++; continue }
    if (isident(tok[p])) {
      path = join(path, tok[p]); p++
      if (tok[p] == "::") continue
      alias = ""
      if (tok[p] == "as") { alias = tok[p + 1]; p += 2 }
      leaf(path, alias, pub)
      return
    }
    return
  }
}

function parsefile(f,    depth, nst, t, pub, path) {
  curf = f; lex(text[f]); delete text[f]
  depth = 0; nst = 0; curmod = fmod[f]
  for (p = 1; p <= ntok; ) {
    t = tok[p]
    if (t == "{") { depth++; p++; continue }
    if (t == "}") {
      depth--; p++
      if (nst > 0 && depth == stdepth[nst]) { nst--; curmod = parent(curmod) }
      continue
    }
    if (t == "mod" && isident(tok[p + 1]) && tok[p + 2] == "{") {
      stdepth[++nst] = depth; curmod = join(curmod, tok[p + 1]); p += 2
      continue
    }
    if (t == "use" && (p == 1 || tok[p - 1] != "::")) {
      pub = p > 1 && (tok[p - 1] == "pub" || (tok[p - 1] == ")" && tok[p - 4] == "pub"))
      p++
      if (tok[p] == "::") continue   # ::extern_crate
      usetree("", pub)
      continue
    }
    if (isident(t) && tok[p + 1] == "::" && (p == 1 || (tok[p - 1] != "::" && tok[p - 1] != "$"))) {
      if (t == "crate" || t == "super" || t == "self" || join(curmod, t) in ismod) {
        path = t; p++
        while (tok[p] == "::" && isident(tok[p + 1])) { path = path "::" tok[p + 1]; p += 2 }
        leaf(path, "", 0)
        continue
      }
    }
    p++
  }
}

# The deepest module that crate-absolute path a names, through re-exports.
function resolve(a, hops,    n, seg, i, m, c) {
  n = split(a, seg, /::/); m = ""
  for (i = 1; i <= n; i++) {
    c = join(m, seg[i])
    if (c in ismod) { m = c; continue }
    if ((m SUBSEP seg[i]) in reexp && hops < 16) {
      c = reexp[m SUBSEP seg[i]]
      for (i++; i <= n; i++) c = c "::" seg[i]
      return resolve(c, hops + 1)
    }
    break
  }
  return m
}

function haskids(m,    k) {
  for (k in ismod) if (k != m && parent(k) == m && k != "") return 1
  return 0
}

# How a module is named in reports: its folder ("x/") or its file.
function label(m) {
  if (m != "" && haskids(m)) { gsub(/::/, "/", m); return m "/" }
  return modrel[m]
}

function dfs(s, v,    k, u, j, cyc) {
  color[s, v] = 1; stack[++sp] = v
  for (k = 1; k <= nadj[s, v]; k++) {
    u = adj[s, v, k]
    if (color[s, u] == 1) {
      cyc = ""
      for (j = sp; j >= 1 && stack[j] != u; j--) ;
      for (; j <= sp; j++) cyc = cyc stack[j] " -> "
      cyc = cyc u
      printf "%s: CYCLE in %s: %s\n", src, (s == "" ? "the crate root" : label(s)), cyc
      cycles++
      for (j = 1; j <= sp; j++) cycmember[s, stack[j]] = 1
      continue
    }
    if (!color[s, u]) dfs(s, u)
  }
  color[s, v] = 2; sp--
  order[s] = order[s] " " v
}

END {
  for (f = 1; f <= nf; f++) parsefile(f)
  for (r = 1; r <= nref; r++) {
    s = rsrc[r]; t = resolve(rdst[r], 0)
    if (s == t) continue
    # lowest common ancestor, and the child of it on each side
    ns = split(s, ss, /::/); nt = split(t, ts, /::/)
    if (s == "") ns = 0
    if (t == "") nt = 0
    d = ""; k = 1
    while (k <= ns && k <= nt && ss[k] == ts[k]) { d = join(d, ss[k]); k++ }
    if (k > ns || k > nt) {
      # a module and its own folder's file (mod.rs: the folder's shared
      # types, which its children extend): listed, not part of the graph
      from = k <= ns ? label(join(d, ss[k])) : modrel[d]
      to = k <= nt ? label(join(d, ts[k])) : modrel[d]
      if (!((d, from, to) in inner)) inner[d, from, to] = rfile[r] ": " rdst[r]
      continue
    }
    from = label(join(d, ss[k])); to = label(join(d, ts[k]))
    if ((d, from, to) in edge) continue
    edge[d, from, to] = rfile[r] ": " rdst[r]
    scopes[d] = 1
    if (!((d, from) in seen)) { seen[d, from] = 1; nodes[d] = nodes[d] "\n" from }
    if (!((d, to) in seen)) { seen[d, to] = 1; nodes[d] = nodes[d] "\n" to }
    adj[d, from, ++nadj[d, from]] = to
    nedges++
  }
  cycles = 0; nscopes = 0
  for (d in scopes) {
    nscopes++
    nn = split(substr(nodes[d], 2), nl, /\n/)
    for (i = 1; i <= nn; i++) if (!color[d, nl[i]]) { sp = 0; dfs(d, nl[i]) }
  }
  if (verbose || cycles) {
    for (key in edge) {
      split(key, kk, SUBSEP)
      if (verbose || (cycmember[kk[1], kk[2]] && cycmember[kk[1], kk[3]]))
        printf "%s: edge in %s: %s -> %s   (%s)\n", src, (kk[1] == "" ? "the crate root" : label(kk[1])), kk[2], kk[3], edge[key] | "sort"
    }
    close("sort")
  }
  if (verbose) {
    for (key in inner) {
      split(key, kk, SUBSEP)
      printf "%s: folder file and its child in %s: %s -> %s   (%s)\n", src, (kk[1] == "" ? "the crate root" : label(kk[1])), kk[2], kk[3], inner[key] | "sort"
    }
    close("sort")
    for (d in scopes)
      printf "%s: order in %s (users after what they use):%s\n", src, (d == "" ? "the crate root" : label(d)), order[d] | "sort"
    close("sort")
  }
  printf "%s: %d files, %d module edges in %d folders, %s\n", src, nf, nedges, nscopes, (cycles ? cycles " cycle(s)" : "no cycle")
  exit cycles ? 1 : 0
}
AWK

status=0
for src in "${srcs[@]}"; do
  src=${src%/}
  if [ ! -d "$src" ]; then
    echo "check-layout: $src: not a folder" >&2
    exit 2
  fi
  mapfile -t files < <(find "$src" -name '*.rs' -type f | sort)
  if [ ${#files[@]} -eq 0 ]; then
    echo "check-layout: $src: no .rs file" >&2
    exit 2
  fi
  awk -v src="$src" -v verbose="$verbose" "$lexer_and_graph" "${files[@]}" || status=1
done

for dir in "${sizes[@]}"; do
  dir=${dir%/}
  over=0
  while IFS= read -r -d '' f; do
    n=$(wc -l <"$f")
    if [ "$n" -gt "$max_lines" ]; then
      echo "$f: OVERSIZE: $n lines (limit $max_lines)"
      over=$((over + 1))
    fi
  done < <(find "$dir" -name target -prune -o -type f \( -name '*.rs' -o -name '*.cu' \) -print0)
  if [ "$over" -gt 0 ]; then
    status=1
  else
    echo "$dir: no .rs/.cu file over $max_lines lines"
  fi
done
exit $status

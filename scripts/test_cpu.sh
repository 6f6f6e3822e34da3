#!/usr/bin/env bash
# The README's test command in a cgroup of its own, to see what its time is spent on: the CPU
# seconds of every process it starts (broker JVMs, RabbitMQ nodes and Spark included, which a
# per-test profile misses: they are not reaped children of the test), in total and by kind.
#
#   sudo bash scripts/test_cpu.sh [pytest arguments]
#
# Needs root and the cgroup v1 cpuacct controller (/sys/fs/cgroup/cpuacct). The kinds come from
# sampling each process's CPU once a second, so processes shorter than that are missed there
# (not in the total). Samples go to out/test-cpu/ (out/ is ignored by git).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

controller=/sys/fs/cgroup/cpuacct
if [ ! -w "$controller" ]; then
    echo "test_cpu: needs root and the cgroup v1 cpuacct controller at $controller" >&2
    exit 2
fi
group="$controller/nettel-test-$$"
out=out/test-cpu
mkdir -p "$group" "$out"
samples="$out/samples-$$.txt"
: >"$samples"

kind_of() {  # a process's kind, from its command line
    case "$1" in
        *activemq*) echo activemq ;;
        *pyspark* | *spark*) echo spark ;;
        *beam* | *rabbit* | *erl*) echo rabbitmq ;;
        *"service serve"* | *"service run"*) echo nettel-serve ;;
        *benchmarks*) echo benchmarks ;;
        *execnet* | *xdist* | *pytest* | *"exec(eval(sys.stdin"*) echo pytest ;;
        *chrom*) echo chromium ;;
        *rucio*) echo rucio ;;
        *java* | *keytool*) echo java-other ;;
        *python*) echo python-other ;;
        *) echo other ;;
    esac
}

(echo "$BASHPID" >"$group/cgroup.procs" && exec bash scripts/test.sh "$@") &
main=$!
while kill -0 "$main" 2>/dev/null; do
    while read -r pid; do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        command=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
        ticks=$(sed 's/.*) //' <<<"$stat" | awk '{print $12 + $13}')
        echo "$pid $(kind_of "$command") $ticks" >>"$samples"
    done <"$group/cgroup.procs"
    sleep 1
done
wait "$main"
status=$?

total=$(($(cat "$group/cpuacct.usage") / 1000000000))
rmdir "$group" 2>/dev/null
echo "test_cpu: exit $status, ${total} CPU-seconds in all; by kind (sampled):"
awk -v hz="$(getconf CLK_TCK)" '
    { key = $1 " " $2; if ($3 > last[key]) last[key] = $3 }
    END { for (key in last) { split(key, part, " "); seconds[part[2]] += last[key] / hz }
          for (kind in seconds) printf "  %8.1f s %s\n", seconds[kind], kind }
' "$samples" | sort -rn
exit "$status"

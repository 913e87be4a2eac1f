#!/usr/bin/env bash
# The privileged tests on a real cgroup v2 host under systemd: a Debian 12 guest (kernel 6.1 cloud,
# systemd 252 as PID 1, cgroup2 with nsdelegate) booted under qemu with 2 vCPUs on 2 NUMA nodes.
#
#   scripts/vm-test.sh [-R REGEX] [--keep] [--run COMMAND]
#   scripts/vm-test.sh --image        only build the guest image into its cache (scripts/test.sh runs this
#                                     beside the release build)
#
# 1. The guest image (root file system, kernel, initrd) is built once with mmdebstrap from Debian's
#    packages (scripts/deps.sh --list guest) and cached in $KEEL_VM_CACHE (default /var/cache/keel-vm),
#    keyed by the package list and the files baked into it (scripts/vm/keel-vm.service, keel-vm-boot).
# 2. The release build (scripts/build.sh release, run first) and the sources go on a second disk image that the guest
#    mounts at this tree's own path, so ctest runs the same binaries at the same paths as on the host.
# 3. qemu boots the guest on a throw-away overlay of the image (the cached image never changes);
#    scripts/vm/guest.sh prints the guest's `keel probe` and runs `ctest -L priv` (the tests that need
#    root), and this script streams its output and exits with ctest's status.
# KEEL_VM_CMDLINE adds guest kernel arguments (such as loglevel=7 to see a stuck guest's sysrq output).
# -R REGEX runs only the matching tests; --keep keeps the run's directory (console log, disks);
# --run COMMAND runs a shell command in the guest (in the tree, as root) instead of the tests, and
# exits with its status: for trying something on a v2 host under systemd by hand.
# It skips (exit 0, with the reason) where qemu cannot run a guest here; under CI=true that fails
# instead (exit 1): a CI that could not run the guest has not run the tests on cgroup v2. It never falls
# back to a fake tree. At the end it says where the stage's time went: the image, the tree disk, the boot,
# each test suite, the rest.
# Where KVM works it is used; otherwise TCG (software emulation, several times slower: functional checks only).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

filter=()
keep=0
command=
image_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -R) filter=(-R "$2"); shift 2 ;;
    --keep) keep=1; shift ;;
    --run) command=$2; shift 2 ;;
    --image) image_only=1; shift ;;
    *) echo "usage: $0 [-R REGEX] [--keep] [--run COMMAND] | --image" >&2; exit 2 ;;
  esac
done

started=$SECONDS
stage() { echo "vm-test: $* ($((SECONDS - started)) s)"; }
skip() {
  if [[ ${CI:-} == true ]]; then
    echo "vm-test: cannot run the guest: $* (CI=true: a stage that could not run fails)" >&2
    exit 1
  fi
  echo "vm-test: skipped: $*"
  exit 0
}
# Where the time went, for the summary at the end: seconds per part.
declare -A took=()
mark=$SECONDS
spent() { took[$1]=$(( ${took[$1]:-0} + SECONDS - mark )); mark=$SECONDS; }

[[ $(id -u) -eq 0 ]] || skip "builds a guest image and boots it (root only)"
[[ $(uname -m) == x86_64 ]] || skip "the guest is x86_64 and this host is $(uname -m)"
for tool in qemu-system-x86_64 qemu-img mmdebstrap mke2fs; do
  command -v "$tool" >/dev/null || skip "no $tool (scripts/deps.sh test installs it)"
done

# --- 1. the guest image, cached by what goes into it -----------------------------------------------------
cache=${KEEL_VM_CACHE:-/var/cache/keel-vm}
read -r -a packages <<<"$(bash scripts/deps.sh --list guest)"
# (image format 2: the root disk's inode tables written at mke2fs, no ext4lazyinit in the guest)
key=$( (echo "image format 2"; printf '%s\n' "${packages[@]}"; cat scripts/vm/keel-vm.service scripts/vm/keel-vm-boot) |
  sha256sum | cut -c1-16)
image=$cache/$key
if [[ ! -f $image/done ]]; then
  stage "building the guest image $image (${#packages[@]} packages)"
  rm -rf "$image"
  mkdir -p "$image"
  tree=$image/tree
  mkdir "$tree"
  include=$(IFS=,; echo "${packages[*]}")
  # The machine's own apt sources (no mirror argument); no recommends, as the host's installs.
  mmdebstrap --quiet --variant=apt --aptopt='APT::Install-Recommends "false"' \
    --include="$include" bookworm "$tree" >"$image/mmdebstrap.log" 2>&1 ||
    { tail -20 "$image/mmdebstrap.log"; echo "vm-test: mmdebstrap failed" >&2; exit 1; }
  cp "$tree"/boot/vmlinuz-* "$image/vmlinuz"
  cp "$tree"/boot/initrd.img-* "$image/initrd"
  echo keel-vm >"$tree/etc/hostname"
  echo "/dev/vda / ext4 rw,relatime 0 1" >"$tree/etc/fstab"
  chroot "$tree" passwd -d root >/dev/null
  install -m 0755 scripts/vm/keel-vm-boot "$tree/usr/local/sbin/keel-vm-boot"
  install -m 0644 scripts/vm/keel-vm.service "$tree/etc/systemd/system/keel-vm.service"
  ln -s /etc/systemd/system/keel-vm.service "$tree/etc/systemd/system/multi-user.target.wants/keel-vm.service"
  # Nothing the tests do not start themselves: no login prompts, and the tests' servers (docker,
  # redis, prometheus) start only when a test starts them.
  for unit in serial-getty@ttyS0.service serial-getty@ttyS1.service getty@tty1.service docker.service \
    docker.socket containerd.service redis-server.service prometheus.service apt-daily.timer \
    apt-daily-upgrade.timer man-db.timer e2scrub_all.timer fstrim.timer; do
    ln -sf /dev/null "$tree/etc/systemd/system/$unit"
  done
  mke2fs -q -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 -L keel-vm -d "$tree" "$image/root.img" 6G >/dev/null
  rm -rf "$tree"
  touch "$image/done"
  stage "guest image built"
  # Images of other package lists are stale (1.5 GiB each): removed, the cache keeps one.
  for old in "$cache"/*; do
    if [[ $old != "$image" && $(basename "$old") =~ ^[0-9a-f]{16}$ ]]; then
      rm -rf "$old"
      stage "removed the stale image $old"
    fi
  done
else
  stage "guest image $image (cached)"
fi
spent image
[[ $image_only -eq 1 ]] && exit 0

# --- 2. the tree at its own path, on a second disk ---------------------------------------------------------
# Always brought up to date: the guest has no compiler, and the make that cpack runs there would find a
# source changed since the last build out of date.
stage "the release build, up to date"
bash scripts/build.sh release
spent build
# What the build read outside the tree (CMake package files, headers, libraries) must be in the guest too:
# cpack runs make, which checks them and re-configures or recompiles without them (no compiler there).
# Say which package the guest list lacks.
build_inputs=$( {
  sed -n '/CMAKE_MAKEFILE_DEPENDS/,/)/p' build/CMakeFiles/Makefile.cmake 2>/dev/null | tr -d '"' | awk '{print $1}'
  find build -name '*.o.d' -exec cat {} + 2>/dev/null | sed -e 's/\\$//' -e 's/^[^:]*: //' | tr ' ' '\n'
  find build -name build.make -exec grep -h '^[^#]*: /usr' {} + 2>/dev/null | awk '{print $2}'
} | grep '^/' | grep -v -e "^$PWD/" -e '^/usr/share/cmake-' | sort -u)
if [[ -n $build_inputs ]]; then
  for owner in $(xargs dpkg -S <<<"$build_inputs" 2>/dev/null | cut -d: -f1 | tr ',' '\n' | sort -u); do
    printf '%s\n' "${packages[@]}" | grep -qx "$owner" ||
      echo "vm-test: warning: the build reads files of $owner, which the guest lacks (scripts/deps.sh guest)"
  done
fi
run=$(mktemp -d /var/tmp/keel-vm.XXXXXX)
qemu_pid=
cleanup() {
  [[ -n $qemu_pid ]] && kill "$qemu_pid" 2>/dev/null
  if [[ $keep -eq 1 ]]; then echo "vm-test: kept $run"; else rm -rf "$run"; fi
}
trap cleanup EXIT
# The tree disk and a fresh overlay of the image, for one boot; $1: the tests (names, one per line) to
# run, or all.
make_disks() {
  local stage_dir=$repo/.keel-vm-stage entry size_mb
  rm -rf "$stage_dir" "$run/tree.img" "$run/root.qcow2"
  mkdir "$stage_dir"
  # Hard links: no copy of the build tree, and nothing of it changes (the guest writes its own disk).
  for entry in "$repo"/* "$repo"/.clang-format "$repo"/.clang-tidy; do
    [[ -e $entry ]] || continue
    case "$(basename "$entry")" in build-asan | build-fuzz | .keel-vm-stage) continue ;; esac
    cp -al "$entry" "$stage_dir/"
  done
  mkdir "$stage_dir/.keel-vm"
  printf 'KEEL_VM_CTEST_ARGS=%q\nKEEL_VM_RUN=%q\nKEEL_VM_TESTS=%q\n' "${filter[*]:-}" "$command" "${1:-}" \
    >"$stage_dir/.keel-vm/env"
  size_mb=$(($(du -sm "$stage_dir" | cut -f1) * 2 + 2048))
  mke2fs -q -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 -L keel-tree -d "$stage_dir" "$run/tree.img" \
    "${size_mb}M" >/dev/null
  rm -rf "$stage_dir"
  qemu-img create -q -f qcow2 -F raw -b "$image/root.img" "$run/root.qcow2"
  stage "tree disk ${size_mb} MiB"
  spent "tree disk"
}

# --- 3. boot and run -------------------------------------------------------------------------------------
# TCG with one host thread for both vCPUs (KEEL_VM_TCG=multi: one each). With a thread each, the guest's
# kernel now and then livelocked while patching its own text (BPF attach and detach switch tracepoints'
# static calls with text_poke_bp's int3): both vCPUs spun in exc_int3 and bpf_trace_run4, interrupts
# off, for good (found with where_cpus below), in about one full run in two.
accel=(-accel "tcg,thread=${KEEL_VM_TCG:-single}" -cpu max)
# KVM only where a guest kernel really boots under it (here /dev/kvm opens but nested KVM fails): the
# probe boots the kernel without a root disk and looks for the panic that says it got that far.
if [[ -r /dev/kvm && ${KEEL_VM_KVM:-auto} != off ]]; then
  # (In a shell of its own, which says "Aborted" of a qemu that aborts, to /dev/null.)
  bash -c 'timeout 30 "$@"; exit $?' probe qemu-system-x86_64 -accel kvm -cpu host -m 256 -display none \
    -monitor none -no-reboot -kernel "$image/vmlinuz" -append "console=ttyS0 panic=-1" \
    -serial "file:$run/kvm-probe.log" >/dev/null 2>&1 || true
  grep -q "Unable to mount root" "$run/kvm-probe.log" 2>/dev/null && accel=(-accel kvm -cpu host)
fi
# Under TCG the guest's TSC is qemu's emulation of it: with the TSC as the clock source, the guest (6.1)
# soft-locked both CPUs at boot (ext4lazyinit and systemd, stuck for good) or stopped dead mid-test, now
# and then. The HPET is read through qemu's device model, slower but steady. (The tree disk is made with
# its inode tables written, so the guest has no ext4lazyinit either.)
clock=
[[ ${accel[1]} == tcg* ]] && clock=clocksource=hpet
# shellcheck disable=SC2054
qemu=(qemu-system-x86_64 "${accel[@]}" -m 4096 -smp 2
  -object memory-backend-ram,id=m0,size=2048M -object memory-backend-ram,id=m1,size=2048M
  -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1
  -kernel "$image/vmlinuz" -initrd "$image/initrd"
  -append "console=ttyS0 root=/dev/vda rw quiet $clock ${KEEL_VM_CMDLINE:-} keel.repo=$repo keel.accel=${accel[1]%%,*}"
  -drive "file=$run/root.qcow2,format=qcow2,if=virtio"
  -drive "file=$run/tree.img,format=raw,if=virtio"
  -display none -no-reboot -nic none
  # The qemu monitor on a socket in the run's directory: `echo 'sendkey alt-sysrq-w' | socat -
  # UNIX-CONNECT:DIR/monitor` asks a stuck guest's kernel for its blocked tasks (on the console).
  -monitor "unix:$run/monitor,server,nowait"
  -serial "file:$run/console.log" -serial "file:$run/tests.log")
# Where each vCPU is, by the guest kernel's symbols of this boot (saved by guest.sh on the tree disk),
# read through the qemu monitor: for a guest that stopped making progress.
where_cpus() {
  debugfs -R "dump /.keel-vm/kallsyms $run/kallsyms" "$run/tree.img" >/dev/null 2>&1
  python3 - "$run/monitor" "$run/kallsyms" <<'PY' 2>&1 || true
import bisect, re, socket, sys, time
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
sock.settimeout(1)
def ask(command):
    sock.send((command + "\n").encode())
    time.sleep(0.5)
    out = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    return out.decode(errors="replace")
syms = []
try:
    for line in open(sys.argv[2]):
        addr, _, name = line.split()[:3]
        syms.append((int(addr, 16), name))
except OSError:
    pass
syms.sort()
keys = [a for a, _ in syms]
def name(rip):
    i = bisect.bisect_right(keys, rip) - 1
    return f"{syms[i][1]}+{rip - syms[i][0]:#x}" if i >= 0 and rip - syms[i][0] < 1 << 20 else hex(rip)
ask("")
for sample in range(5):
    regs = ask("info registers -a")
    cpus = re.findall(r"RIP=([0-9a-f]+) RFL=([0-9a-f]+)", regs)
    print("vm-test:   sample %d: " % sample + "; ".join(
        "CPU %d at %s (interrupts %s)" % (n, name(int(rip, 16)), "on" if int(rfl, 16) & 0x200 else "off")
        for n, (rip, rfl) in enumerate(cpus)))
PY
}

# One boot: runs the guest until it ends, its kernel locks up, it stops making progress (no test output
# for $KEEL_VM_STALL s, default 600: longer than any privileged test takes on the guest) or $limit s.
# Sets `ended` to how it ended: done, lockup, stalled, timeout.
boot() {
  stage "booting the guest (${accel[*]})"
  : >"$run/tests.log"
  : >"$run/console.log"
  "${qemu[@]}" &
  qemu_pid=$!
  tail -n +1 --pid="$qemu_pid" -f "$run/tests.log" &
  tail_pid=$!
  local limit=${KEEL_VM_TIMEOUT:-3600} stall=${KEEL_VM_STALL:-600} t size last_size=-1 quiet=0 phase=boot
  ended=done
  for ((t = 0; t < limit; t += 2)); do
    kill -0 "$qemu_pid" 2>/dev/null || break
    # The phases, as the guest's output shows them (to the 2 s of this loop): booting until it prints,
    # then its set-up (systemd up, keel probe) until ctest starts, then the tests until ctest exits.
    if [[ $phase == boot && -s $run/tests.log ]]; then
      spent boot
      phase=setup
    fi
    if [[ $phase == setup ]] && grep -q "^=== ctest (guest" "$run/tests.log"; then
      spent "guest set-up"
      phase=tests
    fi
    if [[ $phase == tests ]] && grep -q "^keel-vm: exit" "$run/tests.log"; then
      spent tests
      phase=shutdown
    fi
    # A guest whose kernel locked up does not come back: stop at once, with its console.
    if grep -q "soft lockup" "$run/console.log" 2>/dev/null; then
      echo "vm-test: the guest's kernel locked up; stopping it" >&2
      ended=lockup
      break
    fi
    size=$(stat -c %s "$run/tests.log")
    if [[ $size == "$last_size" ]]; then quiet=$((quiet + 2)); else quiet=0; fi
    last_size=$size
    if ((quiet >= stall)); then
      echo "vm-test: the guest printed nothing for $stall s: stopped making progress. Where its CPUs are:" >&2
      where_cpus >&2
      ended=stalled
      break
    fi
    sleep 2
  done
  ((t >= limit)) && ended=timeout
  if kill -0 "$qemu_pid" 2>/dev/null; then
    [[ $ended == timeout ]] && echo "vm-test: the guest did not finish in $limit s; its console:" >&2
    kill "$qemu_pid"
    tail -40 "$run/console.log" >&2
  fi
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=
  wait "$tail_pid" 2>/dev/null || true
  spent "$phase"
  cat "$run/tests.log" >>"$run/all-tests.log"
}

# The guest's `keel-vm: exit N` line, terminal colours dropped first: ctest's list of tests that did not run
# ends with a colour reset that lands at the start of the next line.
guest_status() {
  sed -e 's/\x1b\[[0-9;]*m//g' "$run/tests.log" | sed -n 's/^keel-vm: exit \([0-9]*\).*/\1/p' | tail -1
}

make_disks
boot
status=$(guest_status)
# A guest that stopped making progress (under TCG its kernel has now and then spun with interrupts off
# on both CPUs, where it printed nothing) gets one more boot for the tests it had not finished, the one
# it was running included. A test that stalls it again fails the stage. (--run: no second boot.)
if [[ -z $status && $ended =~ ^(stalled|lockup)$ && -z $command ]]; then
  failed_first=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)' "$run/tests.log" || true)
  # By name: ctest numbers tests within what -L and -E leave.
  finished=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .*/\1/p' "$run/tests.log" | sort -u)
  # shellcheck disable=SC2086
  listed=$(cd build && ctest -N -L priv -E '^CgroupV1Actuators[.]' ${filter[*]:-} | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p')
  remaining=$(comm -23 <(sort -u <<<"$listed") <(echo "$finished"))
  cp "$run/tests.log" "$run/tests-first-boot.log"
  if [[ -n $remaining ]]; then
    stage "a second boot for the $(wc -l <<<"$remaining") tests not finished (the first boot's $ended, $failed_first failed before)"
    make_disks "$remaining"
    boot
    status=$(guest_status)
    [[ -n $status && $status -eq 0 && $failed_first -gt 0 ]] && status=8
  fi
fi
if [[ -z $status ]]; then
  echo "vm-test: the guest ended without a status ($ended); its console:" >&2
  tail -40 "$run/console.log" >&2
  exit 1
fi
stage "guest done, ctest exit $status"
# Where the stage's time went (the host's clock, to 2 s), and the tests' by suite (ctest's times in the
# guest, longest first).
parts=
for p in image build "tree disk" boot "guest set-up" tests shutdown; do
  [[ -n ${took[$p]:-} ]] && parts+="${parts:+, }$p ${took[$p]} s"
done
echo "vm-test: where the time went: $parts; total $((SECONDS - started)) s"
echo "vm-test: the tests by suite:"
python3 scripts/ctest-tally.py --suites "$run/all-tests.log" | sed 's/^/vm-test:   /'
exit "$status"

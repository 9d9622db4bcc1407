#!/usr/bin/env bash
# Enter the throwaway copy of this machine and run the rehearsal's steps in it.
#
# Run by amibuild as root under `unshare --mount --net --pid --ipc --uts --fork`, so every mount
# below lives in a private mount namespace that disappears with the last process, and there is
# no network but a loopback that is down. $1 is the rehearsal's temp folder, holding:
#   upper/ work/   the overlay's upper layer (every write of the chain lands here) and work dir
#   merged/        where the copy is mounted
#   io/            steps, stand-ins and state: bound to /.amibuild-rehearse inside the copy
set -euo pipefail

top=$1
root="$top/merged"

# Nothing mounted here may propagate back to the host's mount table.
mount --make-rprivate /
mount -t overlay amibuild-rehearsal -o "lowerdir=/,upperdir=$top/upper,workdir=$top/work" "$root"

# /proc of the new PID namespace; its sys/ read-only so no sysctl write reaches the host kernel.
mount -t proc proc "$root/proc"
mount --bind "$root/proc/sys" "$root/proc/sys"
mount -o remount,bind,ro "$root/proc/sys"
mount -t sysfs -o ro sysfs "$root/sys"

# Fresh /tmp and /run (Packer uploads to /tmp); a /dev with only the harmless character devices.
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mount -t tmpfs -o mode=755 tmpfs "$root/dev"
for dev in null zero full random urandom tty; do
    touch "$root/dev/$dev"
    mount --bind "/dev/$dev" "$root/dev/$dev"
done
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir -p "$root/dev/shm" "$root/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"

mkdir -p "$root/.amibuild-rehearse"
mount --bind "$top/io" "$root/.amibuild-rehearse"

exec chroot "$root" /bin/bash /.amibuild-rehearse/runner.sh

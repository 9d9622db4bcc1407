#!/usr/bin/env bash
# amibuild's clean-up: what the build instance leaves on its disk that no node of the image may share
# or see: its identity, its keys, its state and its logs. Runs as root after the variant's scripts
# and the stage-1 checks, before the hygiene checks (`amibuild tests` lists them).
#
# Environment:
#   AMIBUILD_KEEP_TMP  paths under /tmp that later steps of the build still read, one a line
#                      (the upstream base's working folder); everything else in /tmp goes
#   AMIBUILD_ROOT      the root it cleans ("" = /; tests point it at a folder)
set -euo pipefail
shopt -s nullglob

root=${AMIBUILD_ROOT:-}
state="$root/var/lib/amibuild"
mkdir -p "$state"

# SSH: the host keys (sshd makes new ones at first boot), and the keys and shell history of root
# and the build users (Packer's temporary key among them).
rm -f "$root"/etc/ssh/ssh_host_*
for user in root ec2-user "${SUDO_USER:-}"; do
    [[ -n $user ]] || continue
    home=$(awk -F: -v u="$user" '$1 == u { print $6; exit }' "$root/etc/passwd" 2>/dev/null) || continue
    [[ -n $home && -d $root$home ]] || continue
    rm -f "$root$home/.ssh/authorized_keys" "$root$home/.bash_history" "$root$home/.zsh_history" \
        "$root$home/.python_history"
done

# cloud-init: the state of this instance, so the image's first boot runs its modules again
rm -rf "$root"/var/lib/cloud/data "$root"/var/lib/cloud/instance "$root"/var/lib/cloud/instances "$root"/var/lib/cloud/sem
rm -f "$root"/var/log/cloud-init.log "$root"/var/log/cloud-init-output.log

# what names and addresses this instance: its hostname, DHCP leases and resolver configuration
rm -f "$root"/etc/hostname "$root"/etc/resolv.conf "$root"/var/lib/dhclient/* "$root"/var/lib/dhcp/dhclient.*
rm -rf "$root"/var/lib/yum/history "$root"/var/lib/dnf/history*

# The logs. From this time on only what runs after the clean-up writes them (Packer's session,
# sudo): the log check asserts nothing in them is older.
date +%s >"$state/cleanup-at"
# removed, not truncated: rsyslog and sshd do not create them again before the next boot, which
# is what upstream's validate.sh expects
rm -f "$root"/var/log/secure "$root"/var/log/secure-* "$root"/var/log/messages "$root"/var/log/messages-* "$root"/var/log/wtmp "$root"/var/log/btmp
# auditd holds its log open: stopped first, or its records of the build would stay in the inode
# it writes to. Amazon Linux refuses `systemctl stop auditd` (RefuseManualStop): `service` it is.
if [[ -e "$root"/var/log/audit/audit.log ]]; then
    audit_was_running=0
    if systemctl is-active --quiet auditd >/dev/null 2>&1; then
        audit_was_running=1
        service auditd stop >/dev/null 2>&1 || systemctl stop auditd >/dev/null 2>&1 || true
    fi
    truncate -s 0 "$root"/var/log/audit/audit.log
    rm -f "$root"/var/log/audit/audit.log.*
    if ((audit_was_running)); then
        service auditd start >/dev/null 2>&1 || systemctl start auditd >/dev/null 2>&1 || true
    fi
fi
# The persistent journal: the files journald writes now become archives, which the vacuum then
# removes, so what stays was written after the time above. AL2's systemd (219) has no --rotate.
if [[ -d "$root"/var/log/journal ]]; then
    if systemctl is-active --quiet systemd-journald >/dev/null 2>&1; then
        if ! journalctl --rotate >/dev/null 2>&1; then
            systemctl kill --kill-who=main --signal=SIGUSR2 systemd-journald.service >/dev/null 2>&1 || true
            sleep 1
        fi
        journalctl --vacuum-size=1 >/dev/null 2>&1 || true
    else
        # no journald writing to them: the files go
        find "$root"/var/log/journal -mindepth 1 -delete
    fi
fi

# The machine-id: emptied, not removed (as upstream does). systemd writes a new id at boot for an
# empty file, so no two nodes share the build instance's (journald, DHCP client ids); unlike a missing
# file or "uninitialized", it is no first boot, so unit presets are not applied again.
# Only a hash of the old one stays, for the boot test to tell the new id from it. After the journal's
# vacuum: journalctl finds the persistent journal by this id, and skips it once the file is empty.
if [[ -s "$root"/etc/machine-id ]]; then
    sha256sum <"$root"/etc/machine-id | cut -d' ' -f1 >"$state/build-machine-id.sha256"
fi
truncate -s 0 "$root"/etc/machine-id
# an older copy D-Bus keeps of its own (a link to /etc/machine-id on Amazon Linux)
if [[ -f "$root"/var/lib/dbus/machine-id && ! -L "$root"/var/lib/dbus/machine-id ]]; then
    rm -f "$root"/var/lib/dbus/machine-id
fi

# /tmp: all of it but what a later step still needs and the private folders of running services
keep=()
while IFS= read -r line; do
    [[ -n $line ]] && keep+=("$line")
done <<<"${AMIBUILD_KEEP_TMP:-}"
for path in "$root"/tmp/* "$root"/tmp/.[!.]* "$root"/tmp/..?*; do
    case ${path##*/} in systemd-private-*) continue ;; esac
    for kept in ${keep[@]+"${keep[@]}"}; do  # bash 4.2 (AL2): an empty array is unset under -u
        [[ ${path%/} == "$root${kept%/}" ]] && continue 2
    done
    rm -rf -- "$path"
done

printf 'amibuild clean-up: done at %s\n' "$(date -u -d "@$(cat "$state/cleanup-at")" +%Y-%m-%dT%H:%M:%SZ)"

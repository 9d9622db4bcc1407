"""The commands of the built-in checks of a clean image, as upstream's builds check theirs. Pure.

`after_cleanup`: one check per item of amibuild's clean-up (amibuild/render/provision/cleanup.sh),
run on the build instance after it, as the build's last step. `at_boot`: what only a booted
instance shows (a fresh machine-id, no key left by Packer). `upstream_level`: what upstream's
validate.sh checks of every image, per OS and flavor. Each is (name, command, what it checks);
`amibuild.pipeline.imagetests` makes them `Check` values, named and turned off like the others.
"""

from __future__ import annotations

STATE_DIR = "/var/lib/amibuild"
CLEANUP_AT = f"{STATE_DIR}/cleanup-at"  # epoch seconds, written by the clean-up before it empties the logs
BUILD_MACHINE_ID = f"{STATE_DIR}/build-machine-id.sha256"  # the build instance's machine-id, hashed
FREE_MIB = 1024  # upstream's validate.sh: at least 1 GiB free on /

CheckSpec = tuple[str, str, str]  # name, command, what

# The homes the clean-up empties: root's and the build users' (ec2-user, and whoever ran sudo).
_HOMES = ("homes=$(for user in root ec2-user ${SUDO_USER:-}; do getent passwd \"$user\" | cut -d: -f6; done "
          "| sort -u)\n")


def _none_of(*patterns: str, homes: tuple[str, ...] = ()) -> str:
    """A command that fails naming every path of ``patterns`` (globs) that exists; ``homes``: paths
    relative to each home of `_HOMES`."""
    lines = ["left=''"]
    if homes:
        lines += [_HOMES.rstrip("\n"), "for home in $homes; do",
                  "    for path in " + " ".join(f'"$home"/{h}' for h in homes) + "; do",
                  '        if [ -e "$path" ] || [ -L "$path" ]; then left="$left $path"; fi', "    done", "done"]
    if patterns:
        lines += ["for path in " + " ".join(patterns) + "; do",
                  '    if [ -e "$path" ] || [ -L "$path" ]; then left="$left $path"; fi', "done"]
    lines.append('if [ -n "$left" ]; then echo "left on the image by the build instance:$left"; exit 1; fi')
    return "\n".join(lines)


_STAMP = (f"stamp=$(cat {CLEANUP_AT} 2>/dev/null) || {{ echo \"{CLEANUP_AT} is missing: the clean-up did not "
          "run\"; exit 1; }\n")

# Every log the clean-up empties holds nothing older than it: what Packer's session and sudo wrote
# after it is expected, a line from before is not. Syslog's lines start with their time (no year).
_LOGS = _STAMP + r"""old=''
for log in /var/log/secure /var/log/messages; do
    [ -s "$log" ] || continue
    first=$(head -n 1 "$log")
    case $first in
        [0-9]*) at=$(date -d "${first%% *}" +%s 2>/dev/null) || at=0 ;;  # RFC 3339 (rsyslog's high precision)
        *) at=$(date -d "${first:0:15}" +%s 2>/dev/null) || at=0 ;;  # "Dec  3 08:09:01"
    esac
    [ "$at" -ge "$stamp" ] || old="$old $log"
done
if [ -s /var/log/audit/audit.log ]; then
    at=$(sed -n '1s/.*msg=audit(\([0-9]*\)[.:].*/\1/p' /var/log/audit/audit.log)
    [ "${at:-0}" -ge "$stamp" ] || old="$old /var/log/audit/audit.log"
fi
for log in /var/log/audit/audit.log.* /var/log/secure-* /var/log/messages-*; do
    [ -e "$log" ] && old="$old $log"
done
for log in /var/log/wtmp /var/log/btmp; do
    [ -s "$log" ] || continue
    # utmpdump prints UTC with its offset ([2024-12-03T08:09:01,123456+00:00]): kept, or date reads local time
    first=$(utmpdump "$log" 2>/dev/null | head -n 1 | sed -n 's/.*\[\([0-9][0-9-]*T[0-9:]*\)[,.0-9]*\([^]]*\)\] *$/\1\2/p')
    at=$(date -d "$first" +%s 2>/dev/null) || at=0
    [ "$at" -ge "$stamp" ] || old="$old $log"
done
if [ -d /var/log/journal ] && command -v journalctl >/dev/null; then
    until=$(date -d "@$stamp" '+%Y-%m-%d %H:%M:%S')
    if [ -n "$(journalctl -q --no-pager -D /var/log/journal --until "$until" -n 1 2>/dev/null)" ]; then
        old="$old /var/log/journal"
    fi
fi
if [ -n "$old" ]; then echo "written before the clean-up ($(date -u -d "@$stamp" +%FT%TZ)):$old"; exit 1; fi"""

# /tmp after the clean-up holds only what was written since by Packer (its uploaded scripts) and by
# these checks (their work folders: the checks script's, a check command's), and the private
# folders of running services.
_TMP = _STAMP + """left=''
for path in /tmp/* /tmp/.[!.]* /tmp/..?*; do
    [ -e "$path" ] || [ -L "$path" ] || continue
    case ${path##*/} in
        systemd-private-*) continue ;;
        script_*.sh | amibuild-checks.* | amibuild-check.*) [ "$(stat -c %Y "$path")" -ge "$stamp" ] && continue ;;
    esac
    left="$left $path"
done
if [ -n "$left" ]; then echo "left in /tmp:$left"; exit 1; fi"""

_AUTHORIZED_KEYS_AT_BOOT = _HOMES + """keys=''
for home in $homes; do
    file="$home/.ssh/authorized_keys"
    if [ -f "$file" ] && grep -qvE '^[[:space:]]*(#|$)' "$file"; then keys="$keys $file"; fi
done
# the boot test's instance has no key pair: a key here came with the image (Packer's temporary one)
if [ -n "$keys" ]; then echo "keys in$keys: the image carries them"; exit 1; fi"""

_MACHINE_ID_AT_BOOT = f"""test -s /etc/machine-id || {{ echo "/etc/machine-id is empty or missing after boot"; exit 1; }}
test -s {BUILD_MACHINE_ID} || {{ echo "{BUILD_MACHINE_ID} is missing: the image was not cleaned by amibuild"; exit 1; }}
now=$(sha256sum </etc/machine-id | cut -d' ' -f1)
if [ "$now" = "$(cat {BUILD_MACHINE_ID})" ]; then
    echo "/etc/machine-id is the build instance's: every node of the image shares it"; exit 1
fi"""


def after_cleanup() -> list[CheckSpec]:
    """One check per item of the clean-up, run after it as the build instance's last step."""
    return [
        ("clean-machine-id", "test -e /etc/machine-id || { echo '/etc/machine-id is missing; systemd wants it empty'; "
                             "exit 1; }\nif [ -s /etc/machine-id ]; then echo '/etc/machine-id is not empty: every "
                             "node would share the build instance'\"'\"'s id'; exit 1; fi",
         "/etc/machine-id is empty (systemd writes a new one at first boot)"),
        ("clean-ssh-host-keys", _none_of("/etc/ssh/ssh_host_*"), "no SSH host keys (sshd makes new ones at first boot)"),
        ("clean-authorized-keys", _none_of(homes=(".ssh/authorized_keys",)),
         "no authorized_keys for root and the build users (Packer's temporary key)"),
        ("clean-cloud-init", _none_of("/var/lib/cloud/data", "/var/lib/cloud/instance", "/var/lib/cloud/instances",
                                      "/var/lib/cloud/sem", "/var/log/cloud-init.log", "/var/log/cloud-init-output.log"),
         "no cloud-init state or logs of the build instance"),
        ("clean-hostname", _none_of("/etc/hostname"), "no /etc/hostname"),
        ("clean-dhcp-leases", _none_of("/var/lib/dhclient/*", "/var/lib/dhcp/dhclient.*"), "no DHCP leases"),
        ("clean-package-history", _none_of("/var/lib/yum/history", "/var/lib/dnf/history*"), "no yum/dnf history"),
        ("clean-resolv-conf", _none_of("/etc/resolv.conf"), "no /etc/resolv.conf"),
        ("clean-logs", _LOGS, "secure, messages, wtmp, the audit log and the journal hold nothing older than the "
                              "clean-up"),
        ("clean-tmp", _TMP, "/tmp holds nothing older than the clean-up"),
        ("clean-shell-history", _none_of(homes=(".bash_history", ".zsh_history")),
         "no shell history of root and the build users"),
    ]


def at_boot() -> list[CheckSpec]:
    """The clean-up's items only a booted instance shows: Packer's ssh_clear_authorized_keys acts after
    the provisioners, and systemd writes the new machine-id at first boot. Named like their
    `after_cleanup` checks: turning one off turns off both."""
    return [
        ("clean-machine-id", _MACHINE_ID_AT_BOOT, "a fresh machine-id, not the build instance's (boot test)"),
        ("clean-authorized-keys", _AUTHORIZED_KEYS_AT_BOOT,
         "no key in the authorized_keys of root and ec2-user (boot test, launched without a key pair)"),
    ]


_UNPIGZ = "command -v unpigz >/dev/null || { echo 'unpigz is not installed'; exit 127; }"
_DISK = (f"free=$(df -Pm / | awk 'NR == 2 {{ print $4 }}')\n"
         f"if [ \"${{free:-0}}\" -lt {FREE_MIB} ]; then echo \"$free MiB free on /; at least {FREE_MIB} are needed\"; "
         "exit 1; fi")
_NERDCTL = "if [ -e /sys/class/net/nerdctl0 ]; then echo 'the nerdctl0 link of the build is still there'; exit 1; fi"
_DKMS = """command -v dkms >/dev/null || exit 0  # no dkms: no module to build
status=$(dkms status 2>&1) || { echo "$status"; exit 1; }
bad=$(printf '%s\\n' "$status" | grep . | grep -v installed)
if [ -n "$bad" ]; then echo "dkms modules not built and installed:"; echo "$bad"; exit 1; fi"""
# the driver's own packages carry its version; the container toolkit and the repositories have their own
_NVIDIA = """command -v modinfo >/dev/null || exit 127
module=$(modinfo -F version nvidia 2>/dev/null) || { echo 'no nvidia kernel module'; exit 127; }
packages=$(rpm -qa --qf '%{NAME} %{VERSION}\\n' 'nvidia*' 'kmod-nvidia*' 'libnvidia*' \\
    | grep -vE '^(nvidia-container-toolkit|nvidia-container-toolkit-base|libnvidia-container[^ ]*|nvidia-release|nvidia-repo[^ ]*) ')
if [ -z "$packages" ]; then echo "no nvidia driver package for the module $module"; exit 1; fi
other=$(printf '%s\\n' "$packages" | awk -v v="$module" '$2 != v')
if [ -n "$other" ]; then echo "the nvidia module is $module; these packages are not:"; echo "$other"; exit 1; fi"""
_VERSIONLOCK = """entries=$(yum versionlock list --quiet 2>/dev/null | cut -d: -f2- | grep -E '^[A-Za-z0-9_.+-]+-[0-9]') || true
bad=''
for entry in $entries; do rpm -q "$entry" >/dev/null 2>&1 || bad="$bad $entry"; done
if [ -n "$bad" ]; then echo "versionlock entries no installed package matches:$bad"; exit 1; fi"""
_KERNEL = """command -v yum >/dev/null || exit 127
running=$(uname -r)
pins=$(yum versionlock list --quiet 2>/dev/null | cut -d: -f2- | grep -E '^kernel-[0-9]')
[ -n "$pins" ] || { echo 'no versionlock entry pins the kernel'; exit 127; }
for pin in $pins; do
    case "kernel-$running" in "${pin%\\*}"*) exit 0 ;; esac
done
echo "the running kernel $running is not the one the image pins ($(echo $pins))"; exit 1"""


def upstream_level(os_name: str, flavor: str) -> list[CheckSpec]:
    """What upstream's validate.sh checks of every image it builds, for this OS and flavor."""
    out = [
        ("unpigz", _UNPIGZ, "unpigz is installed (containerd unpacks image layers with it)"),
        ("disk-free", _DISK, f"at least {FREE_MIB // 1024} GiB free on /"),
        ("no-nerdctl0", _NERDCTL, "no nerdctl0 link left by the build"),
        ("dkms", _DKMS, "every dkms module is built and installed"),
    ]
    if flavor in ("nvidia", "gpu"):
        out.append(("nvidia-version", _NVIDIA, "the nvidia kernel module's version is its driver packages'"))
    if os_name == "al2":
        out.append(("kernel-pinned", _KERNEL, "the running kernel is the one the image pins (yum versionlock)"))
        out.append(("versionlock", _VERSIONLOCK, "every yum versionlock entry matches an installed package"))
    return out

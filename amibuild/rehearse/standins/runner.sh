#!/usr/bin/env bash
# Run the rehearsal's steps, in order, inside the throwaway copy (see enter.sh).
#
# Each step is a folder under /.amibuild-rehearse/steps/ written by amibuild:
#   kind      shell | file | local
#   uploads   lines "payload<TAB>remote path<TAB>how": how = file | contents | path | download
#   command   (shell) the execute_command, {{.Vars}} and {{.Path}} already filled in
#   scripts   (shell) the remote script path, for the ERR hook's line numbers
#   valid     (shell) the exit codes that count as success
# and gets back stdout, stderr and result ("exit-status start end", seconds since the epoch).
# Shell steps run as Packer's SSH session would: as the build user, in its home, with its login
# environment, through bash -c; only the sudo stand-in makes a command root again. Uploads are made
# as the build user, as Packer's SCP would. The
# run stops at the first step whose exit status is not valid.
set -uo pipefail

here=/.amibuild-rehearse
user=ec2-user
export AMIBUILD_REHEARSE_STATE="$here/state" AMIBUILD_REHEARSE_BIN="$here/bin"

# The build user the EKS-optimized images have: an ordinary user in the wheel group.
if ! id -u "$user" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash "$user" >"$here/state/setup.log" 2>&1 || {
        printf 'cannot create the build user %s: see setup.log\n' "$user" >&2
        exit 3
    }
fi
home=$(getent passwd "$user" | cut -d: -f6)
mkdir -p "$home"
chown "$user": "$home"
touch "$here/state/setup-done"

as_user() { setpriv --reuid="$user" --regid="$user" --init-groups -- "$@"; }

upload() {  # step folder
    local dir=$1 payload dest how
    [[ -f $dir/uploads ]] || return 0
    while IFS=$'\t' read -r payload dest how; do
        case $how in
            download)
                if [[ ! -e $dest ]]; then
                    printf 'download: %s: No such file or directory\n' "$dest" >&2
                    return 1
                fi
                continue ;;
            contents)
                as_user mkdir -p -- "$dest" || return 1
                as_user cp -R --preserve=mode -- "$dir/$payload/." "$dest/" || return 1 ;;
            *)
                # a path ending in / (or an existing folder) receives the file or folder inside it
                local target=$dest
                if [[ $dest == */ || -d $dest ]]; then target="${dest%/}/$(basename -- "$payload")"; fi
                local parent=${target%/*}  # dirname, without a process per upload
                [[ $target == */* ]] || parent=.
                if [[ ! -d ${parent:-/} ]]; then
                    printf 'scp: %s: No such file or directory\n' "$target" >&2
                    return 1
                fi
                as_user cp -R --preserve=mode -- "$dir/$payload" "$target" || return 1 ;;
        esac
    done <"$dir/uploads"
}

for dir in "$here"/steps/*/; do
    dir=${dir%/}
    printf '%s' "${dir##*/}" >"$here/state/step"
    kind=$(<"$dir/kind")
    start=$EPOCHREALTIME
    status=0
    case $kind in
        file)
            upload "$dir" >"$dir/stdout" 2>"$dir/stderr" || status=$? ;;
        shell)
            upload "$dir" >"$dir/stdout" 2>"$dir/stderr" || status=$?
            if ((status == 0)); then
                # Packer makes every uploaded script executable before running it.
                chmod 0755 "$(<"$dir/scripts")"
                command=$(<"$dir/command")
                # As the build user, who keeps only the right to change user: what sudo uses.
                (cd "$home" && exec setpriv --reuid="$user" --regid="$user" --init-groups \
                    --inh-caps=+setuid,+setgid --ambient-caps=+setuid,+setgid -- env -i HOME="$home" USER="$user" LOGNAME="$user" SHELL=/bin/bash \
                    TERM=dumb LANG=C.UTF-8 PATH="$here/bin:/usr/local/bin:/usr/bin:/usr/local/sbin:/usr/sbin" \
                    BASH_ENV="$here/errhook.sh" AMIBUILD_REHEARSE_SCRIPTS="$(<"$dir/scripts")" \
                    AMIBUILD_REHEARSE_STATE="$AMIBUILD_REHEARSE_STATE" AMIBUILD_REHEARSE_BIN="$AMIBUILD_REHEARSE_BIN" \
                    bash -c "$command") </dev/null >>"$dir/stdout" 2>>"$dir/stderr"
                status=$?
            fi ;;
        *) ;;
    esac
    printf '%s %s %s\n' "$status" "$start" "$EPOCHREALTIME" >"$dir/result"
    valid=0
    [[ -r $dir/valid ]] && valid=$(<"$dir/valid")
    if [[ " $valid " != *" $status "* ]]; then
        break
    fi
done
exit 0

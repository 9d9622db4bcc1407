# shellcheck shell=bash disable=SC2154  # set by the trap itself
# Sourced by every non-interactive bash in the rehearsal (BASH_ENV). In the step's own uploaded
# script only, an ERR trap records where a command failed — script, line, status, command — so the
# report can name the line when `set -e` ends the script without saying where. The hook must never
# change how the script ends: it only appends a line to a file, in the script's own shell (not in
# the subshells of its pipelines), and sets no other trap.
case ":${AMIBUILD_REHEARSE_SCRIPTS:-}:" in
    *":$0:"*)
        amibuild_rehearse_shell=$BASHPID
        # status and line first, on the trap's first line: LINENO counts on through the trap's text
        trap 'amibuild_rehearse_status=$? amibuild_rehearse_line=$LINENO
if [[ $BASHPID == "${amibuild_rehearse_shell:-}" ]]; then
    printf "%s\t%s\t%s\t%s\n" "$0" "$amibuild_rehearse_line" "$amibuild_rehearse_status" "${BASH_COMMAND:-}" >>"${AMIBUILD_REHEARSE_STATE:-/dev/null}/errors" 2>/dev/null
fi' ERR
        ;;
esac

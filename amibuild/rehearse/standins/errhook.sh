# shellcheck shell=bash disable=SC2154  # the variables are set by the traps themselves
# Sourced by every non-interactive bash in the rehearsal (BASH_ENV). In the step's own uploaded
# script only, it records where the script ended with a non-zero status, so the report can name
# the line even when `set -e` or an `exit 1` ends the script without saying where. The DEBUG trap
# keeps the line about to run (functions report their call line) and the one before: bash runs
# the DEBUG trap once more, at line 1, as the EXIT trap starts, so that last one is not the line.
case ":${AMIBUILD_REHEARSE_SCRIPTS:-}:" in
    *":$0:"*)
        trap 'amibuild_rehearse_prev=${amibuild_rehearse_line:-0} amibuild_rehearse_line=$LINENO' DEBUG
        trap 'amibuild_rehearse_status=$? amibuild_rehearse_at=$amibuild_rehearse_line amibuild_rehearse_before=$amibuild_rehearse_prev
if ((amibuild_rehearse_status != 0)); then
    if ((amibuild_rehearse_at <= 1)); then amibuild_rehearse_at=$amibuild_rehearse_before; fi
    printf "%s\t%s\t%s\t%s\n" "$0" "$amibuild_rehearse_at" "$amibuild_rehearse_status" "exit" >>"${AMIBUILD_REHEARSE_STATE}/errors"
fi' EXIT
        ;;
esac

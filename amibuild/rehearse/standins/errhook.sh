# shellcheck shell=bash
# Sourced by every non-interactive bash in the rehearsal (BASH_ENV). In the step's own uploaded
# script only, it records where a failing command was — script, line, status, command — so the
# report can name the line even when `set -e` ends the script without a message.
case ":${AMIBUILD_REHEARSE_SCRIPTS:-}:" in
    *":$0:"*)
        trap 'printf "%s\t%s\t%s\t%s\n" "$0" "$LINENO" "$?" "$BASH_COMMAND" >>"${AMIBUILD_REHEARSE_STATE}/errors"' ERR
        ;;
esac

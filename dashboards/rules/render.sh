#!/usr/bin/env bash
# Prints keel's alert rules for a Prometheus where keel's scrape job has another name, or where the
# runbooks live elsewhere. The rule file names the job in exactly one form, job="keel", and each
# runbook_url as file:///usr/share/doc/keel/dashboards.md#ALERT (where the Debian package installs
# dashboards/README.md); both are replaced, nothing else changes.
# Usage: render.sh [--job NAME] [--runbooks URL] [RULE_FILE] > keel-alerts.yml
#   URL: where dashboards/README.md is served, without '#' (each alert's anchor is appended)
set -euo pipefail
job=keel
runbooks=file:///usr/share/doc/keel/dashboards.md
file=$(dirname "$0")/keel-alerts.yml
while [[ $# -gt 0 ]]; do
  case "$1" in
    --job) job=${2:?--job takes a name}; shift 2 ;;
    --runbooks) runbooks=${2:?--runbooks takes a URL}; shift 2 ;;
    -h | --help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "render.sh: unknown option $1" >&2; exit 2 ;;
    *) file=$1; shift ;;
  esac
done
# A job name or URL that would change the YAML or the sed expression is refused.
[[ $job =~ ^[A-Za-z0-9_.:/-]+$ ]] || { echo "render.sh: --job '$job': letters, digits and _.:/- only" >&2; exit 2; }
[[ $runbooks =~ ^[A-Za-z][A-Za-z0-9+.-]*://[^[:space:]\"\'#|\\]+$ ]] ||
  { echo "render.sh: --runbooks '$runbooks': a URL without spaces, quotes, '#', '|' or '\\'" >&2; exit 2; }
sed -e "s|job=\"keel\"|job=\"$job\"|g" \
    -e "s|runbook_url: \"file:///usr/share/doc/keel/dashboards.md#|runbook_url: \"$runbooks#|" "$file"

#!/bin/sh
# Stand-in for Arm's gatord (test-only): records its arguments, then runs what follows --app.
echo "$@" >> "$(dirname "$0")/gatord-invocations.log"
while [ $# -gt 0 ] && [ "$1" != "--app" ]; do shift; done
shift
exec "$@"

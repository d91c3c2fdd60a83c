# Stand-ins of Android's getprop, setprop, df and getconf as shell functions, in the output formats of the real ones.
# Every virtual device shell sources this file first (device.py), so a call costs no process, as a toybox
# builtin costs the phone little; vbin/getprop, vbin/df and vbin/getconf run the same functions for callers
# that exec them (xargs, env, another shell).  State: $VDEV_STATE/{props.txt,free_kb,page_size}.

getprop() {  # "[key]: [value]" lines; with a key: its value, or the default given
  if [ $# -eq 0 ]; then
    while IFS= read -r _vd_line; do printf '%s\n' "$_vd_line"; done < "$VDEV_STATE/props.txt"
    return 0
  fi
  local _vd_v
  _vd_v=$(grep -F "[$1]: [" "$VDEV_STATE/props.txt" | head -n 1)
  if [ -n "$_vd_v" ]; then _vd_v=${_vd_v#*]: [}; echo "${_vd_v%]}"; else echo "${2:-}"; fi
}

setprop() {  # NAME VALUE: replaces the property (ro.* only when unset); $VDEV_STATE/setprop_denied: refused
  if [ $# -ne 2 ]; then echo "usage: setprop NAME VALUE" >&2; return 1; fi
  if [ -e "$VDEV_STATE/setprop_denied" ] || { case "$1" in ro.*) grep -qF "[$1]: [" "$VDEV_STATE/props.txt";;
                                                        *) false;; esac; }; then
    echo "Failed to set property '$1' to '$2'." >&2
    return 1
  fi
  grep -vF "[$1]: [" "$VDEV_STATE/props.txt" > "$VDEV_STATE/props.txt.new"
  printf '[%s]: [%s]\n' "$1" "$2" >> "$VDEV_STATE/props.txt.new"
  mv "$VDEV_STATE/props.txt.new" "$VDEV_STATE/props.txt"
}

df() {  # toybox's layout; the free space is what the test configured (free_kb)
  local _vd_free _vd_total
  read -r _vd_free < "$VDEV_STATE/free_kb"
  _vd_total=$((_vd_free + 8388608))
  echo "Filesystem       1K-blocks    Used Available Use% Mounted on"
  echo "/dev/block/dm-5 $_vd_total $((_vd_total - _vd_free)) $_vd_free $(( (_vd_total - _vd_free) * 100 / _vd_total ))% /data"
}

getconf() {  # PAGE_SIZE: the device's configured page size (4096, or 16384 on a 16 KB device)
  case "$1" in
    PAGE_SIZE|PAGESIZE) local _vd_size; read -r _vd_size < "$VDEV_STATE/page_size"; echo "$_vd_size" ;;
    *) /usr/bin/getconf "$@" ;;
  esac
}

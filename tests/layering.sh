#!/usr/bin/env bash
# DESIGN.md's layering, checked on the sources: each layer includes only itself and the layers
# below it (client, server, txn, storage, locks, rdma, common, top to bottom), and none includes a
# tool's header (tools/ sits beside the layers: kvbench's node services included).
# usage: layering.sh SOURCE_DIR
set -uo pipefail
src=${1:?source dir}
cd "$src" || exit 1
layers=(client server txn storage locks rdma common)
bad=0
for i in "${!layers[@]}"; do
    layer=${layers[$i]}
    allowed=" ${layers[*]:$i} "
    while IFS= read -r hit; do
        file=${hit%%:*}
        inc=$(sed -E 's|.*#include "([a-z_]+)/.*|\1|' <<<"$hit")
        case $allowed in
        *" $inc "*) ;;
        *) echo "layering: $file includes $inc/ (above $layer, or a tool): ${hit#*:}"; bad=1 ;;
        esac
    done < <(grep -rnE '^#include "[a-z_]+/' "$layer" --include='*.c' --include='*.h' |
             sed -E 's|^([^:]+):[0-9]+:|\1:|')
done
[ $bad = 0 ] && echo "layering: ok (${layers[*]})"
exit $bad

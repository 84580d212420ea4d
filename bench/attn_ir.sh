#===-- bench/attn_ir.sh - attn IR of one attention, for the rigs ---------===#
#
# Sourced by the rigs' gen_kernels.sh: `ir` prints the attn IR module of one
# attention the way python/attn/variants.py AttentionSpec.to_ir writes it
# (the built-in variants only), for attn-compile.
#
#===----------------------------------------------------------------------===#

# ir DTYPE HEAD_DIM QO_HEADS KV_HEADS PAGE LAYOUT ROWS VARIANTS [TILE]
# PAGE: tokens per page or "ragged"; VARIANTS: comma-separated or "-"; TILE:
# the fields of an #attn.tile the attention keeps instead of the chosen one.
ir() {
  local t=$1 D=$2 Hq=$3 Hkv=$4 P=$5 L=$6 rows=$7 vars=$8 tile=${9:-}
  local q="tensor<?x${Hq}x${D}x${t}>" lse="tensor<?x${Hq}xf32>" idx="tensor<?xi32>"
  local kv fmt names
  if [ "$P" = ragged ]; then
    if [ "$L" = NHD ]; then kv="tensor<?x${Hkv}x${D}x${t}>"; else kv="tensor<${Hkv}x?x${D}x${t}>"; fi
    fmt="#attn.bsr<block_rows = $rows, block_cols = 1, layout = $L, indexing = ragged>"
    names="%qo_indptr %kv_indptr"
  else
    if [ "$L" = NHD ]; then kv="tensor<?x${P}x${Hkv}x${D}x${t}>"; else kv="tensor<?x${Hkv}x${P}x${D}x${t}>"; fi
    fmt="#attn.bsr<block_rows = $rows, block_cols = $P, layout = $L>"
    # block_cols = 1 has no last-page length: every page is full.
    names="%qo_indptr %kv_indptr %kv_indices"
    [ "$P" -gt 1 ] && names="$names %kv_last_len"
  fi
  local args="%q: $q, %k: $kv, %v: $kv" n ops="" types=""
  for n in $names; do args="$args, $n: $idx"; ops="$ops${ops:+, }$n"; types="$types${types:+, }$idx"; done
  args="$args, %sm_scale: f32"
  # The built-in variants' parameters, in order (lib/Dialect/Attn/IR/BuiltinVariants.mlir).
  local v ptypes="" refs=""
  if [ "$vars" != - ]; then
    for v in ${vars//,/ }; do
      refs="$refs${refs:+, }@$v"
      case $v in
        sliding_window) ptypes="$ptypes i32" ;;
        soft_cap|logits_scale) ptypes="$ptypes f32" ;;
        rope) ptypes="$ptypes f32 f32" ;;
        rope_llama31) ptypes="$ptypes f32 f32 f32 f32 f32 f32" ;;
        sinks) ptypes="$ptypes memref<?xf32>" ;;
      esac
    done
  fi
  local i=0 pops="" ptys="" ty
  for ty in $ptypes; do
    args="$args, %p$i: $ty"; pops="$pops${pops:+, }%p$i"; ptys="$ptys${ptys:+, }$ty"; i=$((i + 1))
  done
  echo "func.func @attention($args) -> ($q, $lse) {"
  echo "  %o, %lse = attn.attention %q, %k, %v format($fmt)"
  echo "      indices($ops : $types)"
  echo "      sm_scale(%sm_scale)"
  [ -n "$refs" ] && echo "      variants [$refs]"
  [ -n "$pops" ] && echo "      params($pops : $ptys)"
  [ -n "$tile" ] && echo "      {tile = #attn.tile<$tile>}"
  echo "      : $q, $kv, $kv -> $q, $lse"
  echo "  return %o, %lse : $q, $lse"
  echo "}"
}

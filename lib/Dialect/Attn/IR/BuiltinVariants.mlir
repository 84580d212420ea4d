// The built-in attention variants of attn, written as ordinary attn.variant
// definitions: the kernel generator treats them exactly like a user's own.
// `attn-expand-variants` copies the ones an attention uses into its module.
// Semantics follow docs/Semantics.md (FlashInfer's definitions).

// Keys at or before the query's position (bottom-right aligned).
attn.variant @causal {
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) band <upper = 0> {
    %keep = arith.cmpi sle, %k_pos, %q_pos : i32
    attn.yield %keep : i1
  }
}

// Keys no more than `window_left` positions before the query; a negative
// window means no window. Combine with @causal for the usual p - w <= k <= p.
attn.variant @sliding_window(window_left : i32) {
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) band <lower_param = "window_left"> {
    %w = attn.param "window_left" : i32
    %zero = arith.constant 0 : i32
    %no_window = arith.cmpi slt, %w, %zero : i32
    %lowest = arith.subi %q_pos, %w : i32
    %inside = arith.cmpi sge, %k_pos, %lowest : i32
    %keep = arith.ori %no_window, %inside : i1
    attn.yield %keep : i1
  }
}

// Gemma-2 style logits soft-capping: s -> cap * tanh(s / cap).
attn.variant @soft_cap(cap : f32) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %cap = attn.param "cap" : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %cap, %t : f32
    attn.yield %r : f32
  }
}

// An extra factor on the logits, after sm_scale.
attn.variant @logits_scale(scale : f32) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %scale = attn.param "scale" : f32
    %r = arith.mulf %s, %scale : f32
    attn.yield %r : f32
  }
}

// ALiBi: s -> s + slope_h * (k_pos - q_pos), on the scaled logits. With
// n = 2^floor(log2 H), slope_h = 2^(-8(h+1)/n) for h < n, then
// 2^(-4(2(h-n)+1)/n) (the ALiBi paper's rule for H not a power of two).
// List it before @soft_cap: the cap applies to the biased logits.
attn.variant @alibi {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %num_heads = attn.config num_qo_heads : i32
    %one = arith.constant 1 : i32
    %c31 = arith.constant 31 : i32
    %lz = math.ctlz %num_heads : i32
    %log2n = arith.subi %c31, %lz : i32
    %n = arith.shli %one, %log2n : i32
    %nf = arith.sitofp %n : i32 to f32
    %in_first = arith.cmpi slt, %head, %n : i32
    // First n heads: -8 (h + 1) / n.
    %h1 = arith.addi %head, %one : i32
    %h1f = arith.sitofp %h1 : i32 to f32
    %m8 = arith.constant -8.0 : f32
    %a0 = arith.mulf %h1f, %m8 : f32
    %a = arith.divf %a0, %nf : f32
    // The rest: -4 (2 (h - n) + 1) / n.
    %k = arith.subi %head, %n : i32
    %two = arith.constant 2 : i32
    %k2 = arith.muli %k, %two : i32
    %k21 = arith.addi %k2, %one : i32
    %k21f = arith.sitofp %k21 : i32 to f32
    %m4 = arith.constant -4.0 : f32
    %b0 = arith.mulf %k21f, %m4 : f32
    %b = arith.divf %b0, %nf : f32
    %exponent = arith.select %in_first, %a, %b : f32
    %slope = math.exp2 %exponent : f32
    %dist = arith.subi %k_pos, %q_pos : i32
    %distf = arith.sitofp %dist : i32 to f32
    %bias = arith.mulf %slope, %distf : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
}

// Rotate-half (NeoX) RoPE on the fly, applied to q at its position and to k
// at its own: element d pairs with d +- D/2, at angle
// (pos / rope_scale) * rope_theta^(-2 (d mod D/2) / D).
attn.variant @rope(rope_scale : f32, rope_theta : f32) {
  attn.hook query_transform(%x : f32, %x_pair : f32, %dim : i32, %pos : i32, %head : i32) {
    %scale = attn.param "rope_scale" : f32
    %theta = attn.param "rope_theta" : f32
    %d = attn.config head_dim : i32
    %two = arith.constant 2 : i32
    %half = arith.divsi %d, %two : i32
    %j = arith.remsi %dim, %half : i32
    %jf = arith.sitofp %j : i32 to f32
    %df = arith.sitofp %d : i32 to f32
    %m2 = arith.constant -2.0 : f32
    %e0 = arith.mulf %jf, %m2 : f32
    %e1 = arith.divf %e0, %df : f32
    %log_theta = math.log2 %theta : f32
    %e = arith.mulf %e1, %log_theta : f32
    %inv_freq = math.exp2 %e : f32
    %posf = arith.sitofp %pos : i32 to f32
    %p = arith.divf %posf, %scale : f32
    %angle = arith.mulf %p, %inv_freq : f32
    %cos = math.cos %angle : f32
    %sin = math.sin %angle : f32
    %first_half = arith.cmpi slt, %dim, %half : i32
    %neg_pair = arith.negf %x_pair : f32
    %pair = arith.select %first_half, %neg_pair, %x_pair : f32
    %a = arith.mulf %x, %cos : f32
    %b = arith.mulf %pair, %sin : f32
    %r = arith.addf %a, %b : f32
    attn.yield %r : f32
  }
  attn.hook key_transform(%x : f32, %x_pair : f32, %dim : i32, %pos : i32, %head : i32) {
    %scale = attn.param "rope_scale" : f32
    %theta = attn.param "rope_theta" : f32
    %d = attn.config head_dim : i32
    %two = arith.constant 2 : i32
    %half = arith.divsi %d, %two : i32
    %j = arith.remsi %dim, %half : i32
    %jf = arith.sitofp %j : i32 to f32
    %df = arith.sitofp %d : i32 to f32
    %m2 = arith.constant -2.0 : f32
    %e0 = arith.mulf %jf, %m2 : f32
    %e1 = arith.divf %e0, %df : f32
    %log_theta = math.log2 %theta : f32
    %e = arith.mulf %e1, %log_theta : f32
    %inv_freq = math.exp2 %e : f32
    %posf = arith.sitofp %pos : i32 to f32
    %p = arith.divf %posf, %scale : f32
    %angle = arith.mulf %p, %inv_freq : f32
    %cos = math.cos %angle : f32
    %sin = math.sin %angle : f32
    %first_half = arith.cmpi slt, %dim, %half : i32
    %neg_pair = arith.negf %x_pair : f32
    %pair = arith.select %first_half, %neg_pair, %x_pair : f32
    %a = arith.mulf %x, %cos : f32
    %b = arith.mulf %pair, %sin : f32
    %r = arith.addf %a, %b : f32
    attn.yield %r : f32
  }
}

// RoPE with Llama-3.1 frequency scaling: with wavelength 2 pi / f, keep f
// when the wavelength is under original_context / high_freq_factor, use
// f / rope_factor above original_context / low_freq_factor, and blend
// linearly in between. Llama-3.1 uses theta 5e5, factor 8, factors 1 / 4,
// original context 8192. Written in frequencies (wavelength under C / high
// is f over 2 pi high / C; the blend weight C f / 2 pi - low over high -
// low), every division is of parameters alone, which the kernel computes
// once: an element of a K tile costs multiplies, not five divisions.
attn.variant @rope_llama31(rope_scale : f32, rope_theta : f32, rope_factor : f32,
                           low_freq_factor : f32, high_freq_factor : f32,
                           original_context : f32) {
  attn.hook query_transform(%x : f32, %x_pair : f32, %dim : i32, %pos : i32, %head : i32) {
    %scale = attn.param "rope_scale" : f32
    %theta = attn.param "rope_theta" : f32
    %factor = attn.param "rope_factor" : f32
    %low = attn.param "low_freq_factor" : f32
    %high = attn.param "high_freq_factor" : f32
    %ctx = attn.param "original_context" : f32
    %two_pi = arith.constant 6.28318530717958647692 : f32
    %one = arith.constant 1.0 : f32
    %per_freq = arith.divf %ctx, %two_pi : f32
    %high_freq = arith.divf %high, %per_freq : f32
    %low_freq = arith.divf %low, %per_freq : f32
    %inv_factor = arith.divf %one, %factor : f32
    %span = arith.subf %high, %low : f32
    %inv_span = arith.divf %one, %span : f32
    %d = attn.config head_dim : i32
    %two = arith.constant 2 : i32
    %half = arith.divsi %d, %two : i32
    %j = arith.remsi %dim, %half : i32
    %jf = arith.sitofp %j : i32 to f32
    %df = arith.sitofp %d : i32 to f32
    %m2 = arith.constant -2.0 : f32
    %e0 = arith.mulf %jf, %m2 : f32
    %e1 = arith.divf %e0, %df : f32
    %log_theta = math.log2 %theta : f32
    %e = arith.mulf %e1, %log_theta : f32
    %freq = math.exp2 %e : f32
    %scaled = arith.mulf %freq, %inv_factor : f32
    %r0 = arith.mulf %per_freq, %freq : f32
    %r1 = arith.subf %r0, %low : f32
    %smooth = arith.mulf %r1, %inv_span : f32
    %keep_w = arith.subf %one, %smooth : f32
    %blend0 = arith.mulf %keep_w, %scaled : f32
    %blend1 = arith.mulf %smooth, %freq : f32
    %blend = arith.addf %blend0, %blend1 : f32
    %is_high = arith.cmpf ogt, %freq, %high_freq : f32
    %is_low = arith.cmpf olt, %freq, %low_freq : f32
    %f_low = arith.select %is_low, %scaled, %blend : f32
    %inv_freq = arith.select %is_high, %freq, %f_low : f32
    %posf = arith.sitofp %pos : i32 to f32
    %p = arith.divf %posf, %scale : f32
    %angle = arith.mulf %p, %inv_freq : f32
    %cos = math.cos %angle : f32
    %sin = math.sin %angle : f32
    %first_half = arith.cmpi slt, %dim, %half : i32
    %neg_pair = arith.negf %x_pair : f32
    %pair = arith.select %first_half, %neg_pair, %x_pair : f32
    %a = arith.mulf %x, %cos : f32
    %b = arith.mulf %pair, %sin : f32
    %r = arith.addf %a, %b : f32
    attn.yield %r : f32
  }
  attn.hook key_transform(%x : f32, %x_pair : f32, %dim : i32, %pos : i32, %head : i32) {
    %scale = attn.param "rope_scale" : f32
    %theta = attn.param "rope_theta" : f32
    %factor = attn.param "rope_factor" : f32
    %low = attn.param "low_freq_factor" : f32
    %high = attn.param "high_freq_factor" : f32
    %ctx = attn.param "original_context" : f32
    %two_pi = arith.constant 6.28318530717958647692 : f32
    %one = arith.constant 1.0 : f32
    %per_freq = arith.divf %ctx, %two_pi : f32
    %high_freq = arith.divf %high, %per_freq : f32
    %low_freq = arith.divf %low, %per_freq : f32
    %inv_factor = arith.divf %one, %factor : f32
    %span = arith.subf %high, %low : f32
    %inv_span = arith.divf %one, %span : f32
    %d = attn.config head_dim : i32
    %two = arith.constant 2 : i32
    %half = arith.divsi %d, %two : i32
    %j = arith.remsi %dim, %half : i32
    %jf = arith.sitofp %j : i32 to f32
    %df = arith.sitofp %d : i32 to f32
    %m2 = arith.constant -2.0 : f32
    %e0 = arith.mulf %jf, %m2 : f32
    %e1 = arith.divf %e0, %df : f32
    %log_theta = math.log2 %theta : f32
    %e = arith.mulf %e1, %log_theta : f32
    %freq = math.exp2 %e : f32
    %scaled = arith.mulf %freq, %inv_factor : f32
    %r0 = arith.mulf %per_freq, %freq : f32
    %r1 = arith.subf %r0, %low : f32
    %smooth = arith.mulf %r1, %inv_span : f32
    %keep_w = arith.subf %one, %smooth : f32
    %blend0 = arith.mulf %keep_w, %scaled : f32
    %blend1 = arith.mulf %smooth, %freq : f32
    %blend = arith.addf %blend0, %blend1 : f32
    %is_high = arith.cmpf ogt, %freq, %high_freq : f32
    %is_low = arith.cmpf olt, %freq, %low_freq : f32
    %f_low = arith.select %is_low, %scaled, %blend : f32
    %inv_freq = arith.select %is_high, %freq, %f_low : f32
    %posf = arith.sitofp %pos : i32 to f32
    %p = arith.divf %posf, %scale : f32
    %angle = arith.mulf %p, %inv_freq : f32
    %cos = math.cos %angle : f32
    %sin = math.sin %angle : f32
    %first_half = arith.cmpi slt, %dim, %half : i32
    %neg_pair = arith.negf %x_pair : f32
    %pair = arith.select %first_half, %neg_pair, %x_pair : f32
    %a = arith.mulf %x, %cos : f32
    %b = arith.mulf %pair, %sin : f32
    %r = arith.addf %a, %b : f32
    attn.yield %r : f32
  }
}

// Attention sinks: a learned per-head logit (scaled-logit units) that joins
// the softmax denominator only; the LSE includes it.
attn.variant @sinks(sinks : memref<?xf32>) {
  attn.hook sink(%head : i32) {
    %table = attn.param "sinks" : memref<?xf32>
    %i = arith.index_cast %head : i32 to index
    %v = memref.load %table[%i] : memref<?xf32>
    attn.yield %v : f32
  }
}

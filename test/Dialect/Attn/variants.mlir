// RUN: attn-opt %s -split-input-file | attn-opt -split-input-file | FileCheck %s
// Round trip of variant definitions: every hook kind, parameters, config.

// CHECK-LABEL: attn.variant @everything(scale : f32, on : i1, table : memref<?xf32>)
// CHECK: attn.hook query_transform(%x: f32, %x_pair: f32, %dim: i32, %pos: i32, %head: i32)
// CHECK: attn.hook key_transform(%x: f32, %x_pair: f32, %dim: i32, %pos: i32, %head: i32)
// CHECK: attn.hook logits_transform(%s: f32, %q_pos: i32, %k_pos: i32, %head: i32)
// CHECK:   attn.param "scale" : f32
// CHECK: attn.hook logits_mask(%q_pos: i32, %k_pos: i32, %head: i32)
// CHECK:   attn.param "on" : i1
// CHECK: attn.hook output_transform(%o: f32, %dim: i32, %q_pos: i32, %head: i32)
// CHECK:   attn.config head_dim : i32
// CHECK: attn.hook sink(%head: i32)
// CHECK:   memref.load
attn.variant @everything(scale : f32, on : i1, table : memref<?xf32>) {
  attn.hook query_transform(%x : f32, %x_pair : f32, %dim : i32, %pos : i32, %head : i32) {
    attn.yield %x : f32
  }
  attn.hook key_transform(%x : f32, %x_pair : f32, %dim : i32, %pos : i32, %head : i32) {
    attn.yield %x_pair : f32
  }
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %scale = attn.param "scale" : f32
    %r = arith.mulf %s, %scale : f32
    attn.yield %r : f32
  }
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
    %on = attn.param "on" : i1
    attn.yield %on : i1
  }
  attn.hook output_transform(%o : f32, %dim : i32, %q_pos : i32, %head : i32) {
    %d = attn.config head_dim : i32
    %df = arith.sitofp %d : i32 to f32
    %r = arith.divf %o, %df : f32
    attn.yield %r : f32
  }
  attn.hook sink(%head : i32) {
    %table = attn.param "table" : memref<?xf32>
    %i = arith.index_cast %head : i32 to index
    %v = memref.load %table[%i] : memref<?xf32>
    attn.yield %v : f32
  }
}

// -----

// An empty variant is the identity.
// CHECK-LABEL: attn.variant @identity {
// CHECK-NEXT: }
attn.variant @identity {
}

// RUN: attn-opt %s --attn-approximate-trig | FileCheck %s

// f32 sin/cos are reduced into [-pi, pi] with three fma steps (2pi split
// in three parts) and marked afn, so the NVVM lowering picks the hardware's
// sin.approx/cos.approx instead of libdevice's sinf/cosf.
// CHECK-LABEL: func.func @rope_angle
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[T:.*]] = arith.mulf %[[X]], %{{.*}} : f32
// CHECK: %[[K:.*]] = math.roundeven %[[T]] : f32
// CHECK: %[[NK:.*]] = arith.negf %[[K]] : f32
// CHECK: %[[R1:.*]] = math.fma %[[NK]], %{{.*}}, %[[X]] : f32
// CHECK: %[[R2:.*]] = math.fma %[[NK]], %{{.*}}, %[[R1]] : f32
// CHECK: %[[R3:.*]] = math.fma %[[NK]], %{{.*}}, %[[R2]] : f32
// CHECK: math.sin %[[R3]] fastmath<afn> : f32
// CHECK: math.cos %{{.*}} fastmath<afn> : f32
func.func @rope_angle(%x: f32) -> (f32, f32) {
  %s = math.sin %x : f32
  %c = math.cos %x : f32
  return %s, %c : f32, f32
}

// Other widths, and ops already marked afn, are left alone.
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT: math.sin %{{.*}} : f64
// CHECK-NEXT: math.cos %{{.*}} fastmath<afn> : f32
// CHECK-NEXT: return
func.func @left_alone(%x: f64, %y: f32) -> (f64, f32) {
  %s = math.sin %x : f64
  %c = math.cos %y fastmath<afn> : f32
  return %s, %c : f64, f32
}

// f32 tanh (the soft-cap variant's) becomes LLVM's tanh marked afn, which
// NVPTX emits as tanh.approx.f32; other widths keep libdevice's.
// CHECK-LABEL: func.func @soft_cap
// CHECK-NEXT: llvm.intr.tanh(%{{.*}}) {fastmathFlags = #llvm.fastmath<afn>} : (f32) -> f32
// CHECK-NEXT: math.tanh %{{.*}} : f64
func.func @soft_cap(%x: f32, %y: f64) -> (f32, f64) {
  %t = math.tanh %x : f32
  %u = math.tanh %y : f64
  return %t, %u : f32, f64
}

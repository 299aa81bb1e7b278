  // The product's words as the matmul kernels read them (matmul.wgsl's header): sizes, the
  // batch entry b, the output tile's first row m0 and column n0 (tiles of TILE), the
  // operands' strides and batch entry b's first elements.
  let M = pw(0u);
  let N = pw(1u);
  let K = pw(2u);
  let b = wid.z;
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  let sAm = pi(7u);
  let sAk = pi(8u);
  let sBk = pi(10u);
  let sBn = pi(11u);
  let aBase = pi(3u) + i32(b) * pi(6u);
  let bBase = pi(4u) + i32(b) * pi(9u);

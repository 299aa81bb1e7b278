// Where the stride-phase input gradient (conv_load_dgrad_phase.wgsl) stores: column n of
// the product is pixel (u, v) = (q / IMG_WIDTH, q % IMG_WIDTH), q = n % IMG_PIXELS, of the
// phase's U x V grid of image n / IMG_PIXELS (or of image b, one a batch entry), which is
// input pixel (PA + SH*u, PB + SW*v) of an OUT_PIXELS-pixel image OUT_WIDTH wide, stored
// NCHW; the phases of a gradient write disjoint pixels that cover it.
const IMG_PIXELS = {{IMG_PIXELS}}u;
const IMG_WIDTH = {{IMG_WIDTH}}u;
const OUT_PIXELS = {{OUT_PIXELS}}u;
const OUT_WIDTH = {{OUT_WIDTH}}u;
const PA = {{PA}}u;
const PB = {{PB}}u;

fn out_at(b: u32, row: u32, col: u32, M: u32, N: u32) -> u32 {
  let i = col / IMG_PIXELS;
  let q = col - i * IMG_PIXELS;
  let u = q / IMG_WIDTH;
  return pw(5u) + ((b + i) * M + row) * OUT_PIXELS + (PA + SH * u) * OUT_WIDTH + PB
         + SW * (q - u * IMG_WIDTH);
}

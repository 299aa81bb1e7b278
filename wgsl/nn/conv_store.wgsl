// The implicit-GEMM convolution's output columns with the images folded in: column n of
// the product is pixel n % IMG_PIXELS (of a row IMG_WIDTH wide) of image n / IMG_PIXELS, so
// the products of all images fill the tiles together (a 4x4 image alone fills a quarter
// of a 64-column tile). The results are stored in (image, row of the product, pixel) order:
// NCHW. With one image per batch entry b of the kernel instead, every column is of image b
// (word 26 is 1); in slices of the depth, entry b is a slice and stores its partial
// results after b times the word 26 images of the others.
const IMG_PIXELS = {{IMG_PIXELS}}u;
const IMG_WIDTH = {{IMG_WIDTH}}u;

fn out_at(b: u32, row: u32, col: u32, M: u32, N: u32) -> u32 {
  let i = col / IMG_PIXELS;
  return pw(5u) + ((b * pw(26u) + i) * M + row) * IMG_PIXELS + (col - i * IMG_PIXELS);
}

// The image of column n (its first element: B's base plus the image's stride, word 25) and
// its pixel (row, column) within the image; ok: n is a column of the product.
struct ConvCol { base: i32, row: u32, col: u32, ok: bool }

fn conv_col(bBase: i32, n: u32, N: u32) -> ConvCol {
  let img = n / IMG_PIXELS;
  let q = n - img * IMG_PIXELS;
  let r = q / IMG_WIDTH;
  return ConvCol(bBase + i32(img) * pi(25u), r, q - r * IMG_WIDTH, n < N);
}

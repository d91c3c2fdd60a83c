package android.graphics;

/** Working fake: an ARGB_8888 pixel array (see README.md). */
public final class Bitmap {
    public enum Config { ARGB_8888 }

    private final int[] colors;
    private final int width;
    private final int height;

    private Bitmap(int[] colors, int width, int height) {
        this.colors = colors;
        this.width = width;
        this.height = height;
    }

    public static Bitmap createBitmap(int[] colors, int width, int height, Config config) {
        return new Bitmap(colors.clone(), width, height);
    }

    public int getWidth() {
        return width;
    }

    public int getHeight() {
        return height;
    }

    public void getPixels(int[] pixels, int offset, int stride, int x, int y, int w, int h) {
        for (int row = 0; row < h; row++) {
            System.arraycopy(colors, (y + row) * width + x, pixels, offset + row * stride, w);
        }
    }
}

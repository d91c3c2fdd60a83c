package android.graphics;
public class Canvas {
    public Canvas(Bitmap bitmap) { throw new RuntimeException("Stub!"); }
    public int save() { throw new RuntimeException("Stub!"); }
    public void restore() { throw new RuntimeException("Stub!"); }
    public final void rotate(float degrees, float px, float py) { throw new RuntimeException("Stub!"); }
    public void drawBitmap(Bitmap bitmap, Rect src, Rect dst, Paint paint) { throw new RuntimeException("Stub!"); }
}

package android.graphics;
public class Paint {
    public static final int FILTER_BITMAP_FLAG = 2;
    public Paint(int flags) { throw new RuntimeException("Stub!"); }
}

package android.graphics;
public final class Rect {
    public int left, top, right, bottom;
    public Rect(int left, int top, int right, int bottom) { throw new RuntimeException("Stub!"); }
}

package android.graphics;
import java.io.InputStream;
public class BitmapFactory {
    public static Bitmap decodeStream(InputStream is) { throw new RuntimeException("Stub!"); }
}

package androidx.camera.core;
import android.graphics.Bitmap;
public interface ImageProxy extends AutoCloseable {
    @Override void close();
    int getWidth();
    int getHeight();
    ImageInfo getImageInfo();
    default Bitmap toBitmap() { throw new RuntimeException("Stub!"); }
}

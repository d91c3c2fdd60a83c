package android.content;
import android.content.res.AssetManager;
import java.io.File;
public abstract class Context {
    public abstract AssetManager getAssets();
    public abstract File getFilesDir();
    public abstract String getPackageCodePath();
    public abstract int checkSelfPermission(String permission);
}

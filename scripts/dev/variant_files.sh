# Sourced by the dev scripts that time the tree with a VARIANT folder's files in place
# (variant_ab.sh, launch_gaps.sh): VARIANT holds changed files at their paths in the repository.
#   variant_save VARIANT     keep the tree's own copies of VARIANT's files (once, before any swap)
#   variant_apply VARIANT    put VARIANT's files in place
#   variant_restore          put the tree's copies back, and remove the files only VARIANT had
variant_save() {
    rm -rf /tmp/variant-orig
    mkdir -p /tmp/variant-orig
    : >/tmp/variant-new
    (cd "$1" && find . -type f) | while read -r f; do
        if [ -f "$f" ]; then
            mkdir -p "/tmp/variant-orig/$(dirname "$f")"
            cp "$f" "/tmp/variant-orig/$f"
        else
            echo "$f" >>/tmp/variant-new
        fi
    done
}
variant_apply() { cp -r "$1"/. .; }
variant_restore() {
    cp -r /tmp/variant-orig/. .
    xargs -r rm -f </tmp/variant-new
}

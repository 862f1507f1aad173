package captcha

import (
	"bytes"
	"image/png"
	"testing"
)

func TestGlyphsAreFiveBySeven(t *testing.T) {
	for r, g := range glyphs {
		for i, row := range g {
			if len(row) != 5 {
				t.Errorf("glyph %q row %d is %d wide, want 5", r, i, len(row))
			}
		}
	}
}

func TestPNGDrawsTheText(t *testing.T) {
	b, err := PNG("49 - 7 = ?")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got, want := img.Bounds().Dx(), 2*margin+10*advance*scale; got != want {
		t.Errorf("width %d, want %d", got, want)
	}
	ink := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if r, _, _, _ := img.At(x, y).RGBA(); r>>8 == 0x1a {
				ink++
			}
		}
	}
	// "49-7=?" has this many dots in the font; every dot is scale×scale pixels.
	dots := 0
	for _, r := range "49-7=?" {
		for _, row := range glyphs[r] {
			dots += bytes.Count([]byte(row), []byte("#"))
		}
	}
	// Every dot is drawn (nothing is drawn over the glyphs but more ink), plus two strokes of
	// at most one pixel per column.
	if want := dots * scale * scale; ink < want || ink > want+2*img.Bounds().Dx() {
		t.Errorf("%d ink pixels, want %d for the glyphs plus at most two strokes", ink, want)
	}
}

func TestPNGRefusesLetters(t *testing.T) {
	if _, err := PNG("1 + a"); err == nil {
		t.Fatal("drew a letter the font does not have")
	}
}

// Package captcha draws a challenge's question as a small PNG: a bitmap font, each glyph shifted
// and the whole overlaid with noise, so the text is plain to a person and not in the page for a
// script to read. It is a speed bump, not a wall: the one-time path token and the risk rules do
// the rest.
package captcha

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
)

// glyphs are 5×7 bitmaps, one string of five '#'/'.' columns per row.
var glyphs = map[rune][7]string{
	'0': {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."},
	'1': {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'2': {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"},
	'3': {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."},
	'4': {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."},
	'5': {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."},
	'6': {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."},
	'7': {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."},
	'8': {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."},
	'9': {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."},
	'+': {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."},
	'-': {".....", ".....", ".....", "#####", ".....", ".....", "....."},
	'=': {".....", ".....", "#####", ".....", "#####", ".....", "....."},
	'?': {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."},
	' ': {".....", ".....", ".....", ".....", ".....", ".....", "....."},
}

const (
	scale   = 4 // pixels per font dot
	advance = 6 // font dots per glyph, the gap included
	margin  = 8 // pixels around the text
)

// PNG renders text (digits, "+-=? " only) as a PNG image. Errors name the first character it
// cannot draw.
func PNG(text string) ([]byte, error) {
	runes := []rune(text)
	w := 2*margin + len(runes)*advance*scale
	h := 2*margin + 7*scale + 2*scale // room for each glyph's vertical jitter
	img := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{
		color.RGBA{0xfa, 0xfa, 0xf5, 0xff}, // background
		color.RGBA{0x1a, 0x1a, 0x2e, 0xff}, // ink: contrast well above 7:1
		color.RGBA{0x9a, 0x9a, 0xb0, 0xff}, // noise
	})
	for range w * h / 40 { // speckles under the text
		img.SetColorIndex(rand.IntN(w), rand.IntN(h), 2)
	}
	for i, r := range runes {
		g, ok := glyphs[r]
		if !ok {
			return nil, fmt.Errorf("captcha: cannot draw %q", r)
		}
		x0 := margin + i*advance*scale + rand.IntN(3) - 1
		y0 := margin + rand.IntN(2*scale+1)
		for row, bits := range g {
			for col, bit := range bits {
				if bit == '#' {
					fill(img, x0+col*scale, y0+row*scale, scale, 1)
				}
			}
		}
	}
	for range 2 { // thin strokes in ink across the text: plain to a person, in a script's way
		y, dy := rand.IntN(h), rand.IntN(9)-4
		for x := 0; x < w; x++ {
			img.SetColorIndex(x, y+dy*x/w, 1)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func fill(img *image.Paletted, x, y, size int, c uint8) {
	for dy := 0; dy < size; dy++ {
		for dx := 0; dx < size; dx++ {
			img.SetColorIndex(x+dx, y+dy, c)
		}
	}
}

"""issues"""
